"""papcoll benchmarks: ``python -m papcoll.bench <subcommand>``; this folder is the package papcoll.bench."""
