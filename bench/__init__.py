"""papcoll benchmarks: ``python -m papcoll.bench <arrival|ft|...>`` (this folder is the package papcoll.bench)."""
