"""The model's tests' machine (tests/test_model*.py): parameters in round numbers."""
from papcoll.model import params

# Round numbers, so that every time below can be added up by hand (seconds).
VALUES = dict(cores=4, entry=3.0, extra={}, mpi_entry=2.0, poll=0.1, flag=0.2, wake=0.0, tail=1.0,
              copy_o=0.5, copy_G=0.001,
              cma_alpha=1.0, cma_beta=0.002, cma_l=0.5, cma_page=4096, cma_gamma=[1.0, 1.5],
              net_L=2.0, net_o=1.0, net_g=0.5, net_G=0.01,
              **{f"net_{w}_{k}": v for w in ("given", "exposed")
                 for k, v in dict(L=2.0, o=1.0, g=0.5, G=0.01).items()},
              mpi_inter_L=2.0, mpi_inter_o=1.0, mpi_inter_g=0.5, mpi_inter_G=0.01,
              mpi_inter_eager=1000, mpi_inter_shared=0, mpi_intra_L=0.3, mpi_intra_o=0.2,
              mpi_intra_g=0.0, mpi_intra_G=0.001, mpi_intra_eager=1000, copy_threshold=65536,
              net_shared=0, net_copied=1000, net_ack=1.5, net_local_L=2.0, placement=[],
              net_answered=0, net_given_answered=0, net_exposed_answered=0)
M = params.make(**VALUES)
