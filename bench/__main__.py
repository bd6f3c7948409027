"""``python -m papcoll.bench <subcommand> [options]``: papcoll's benchmarks, one module each.

Run them under MPI, e.g. ``mpiexec -n 4 python -m mpi4py -m papcoll.bench arrival --help``.
"""
import argparse
import contextlib
import importlib
import os
import sys

# Subcommand -> (module of this package, one-line summary). Each module has add_arguments(parser)
# and run(args) -> exit status. Only the chosen module is imported, so a broken one breaks only
# its own subcommand.
SUBCOMMANDS = {
    "arrival": ("arrival", "random process-arrival alltoall microbenchmark (PAP paper, Fig. 1-4)"),
    "alternate": ("alternate", "balanced and skewed phases in turn: the adaptive auto's benchmark"),
    "cost": ("cost", "CPU time of a call that need not wait: the library's own work per call"),
    "entry": ("entry", "what entering papcoll costs: back-to-back small calls, vs MPI's own"),
    "ft": ("ft", "NAS FT kernel whose transposes are papcoll alltoalls"),
    "cma-model": ("cma_model", "CMA cost model: alpha, beta, l, gamma_c and the throttle factor"),
    "report": ("report", "run the sweeps itself (not under mpiexec) and write one Markdown report"),
    "tune": ("tune", "measure this machine and write the tuning file (python -m papcoll tune)"),
}


def top_parser():
    listing = "\n".join(f"  {name:12} {summary}" for name, (_, summary) in SUBCOMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="python -m papcoll.bench", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="papcoll's benchmarks, one module each; run them under mpiexec.",
        epilog=f"subcommands:\n{listing}\n\n'<subcommand> --help' shows its options.")
    parser.add_argument("subcommand", choices=SUBCOMMANDS)
    return parser


def parse(argv):
    """The chosen module and its parsed options (argparse exits on --help or bad options)."""
    if not argv or argv[0] not in SUBCOMMANDS:
        top_parser().parse_args(argv[:1])     # prints the help or the error, and exits
    name, options = argv[0], argv[1:]
    module = importlib.import_module(f".{SUBCOMMANDS[name][0]}", __package__)
    parser = argparse.ArgumentParser(prog=f"python -m papcoll.bench {name}",
                                     description=SUBCOMMANDS[name][1])
    module.add_arguments(parser)
    return module, parser.parse_args(options)


def main(argv=None):
    from mpi4py import MPI
    argv = sys.argv[1:] if argv is None else argv
    # Every rank parses the same options; only rank 0 prints the help or the error.
    with open(os.devnull, "w") as devnull, contextlib.ExitStack() as quiet:
        if MPI.COMM_WORLD.Get_rank() != 0:
            quiet.enter_context(contextlib.redirect_stdout(devnull))
            quiet.enter_context(contextlib.redirect_stderr(devnull))
        module, args = parse(argv)
    return module.run(args)


if __name__ == "__main__":
    sys.exit(main())
