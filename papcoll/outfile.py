"""Where the model's commands and the benchmarks write, checked as argparse reads it: a run's
results are not lost to a path that was never usable."""
import argparse
import os
from pathlib import Path


def out_file(text):
    """An argparse type for a file a command writes once it is done: refused at once, not after
    minutes of measuring, where it is a folder or its folder is missing or not writable."""
    path = Path(text)
    folder = path.parent
    why = ("a folder, not a file" if path.is_dir() else
           f"its folder {folder} does not exist" if not folder.is_dir() else
           "not writable" if not os.access(path if path.exists() else folder, os.W_OK) else None)
    if why:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {why}")
    return path


def out_folder(text):
    """An argparse type for a folder a command writes its files into once it is done, made if
    missing: refused at once where a file stands in its way or where it cannot be made."""
    path = there = Path(text)
    while not there.exists():      # the nearest part of it that exists ('.' and '/' do)
        there = there.parent
    why = (f"{there} is a file, not a folder" if not there.is_dir() else
           f"{there} is not writable" if not os.access(there, os.W_OK) else None)
    if why:
        raise argparse.ArgumentTypeError(f"cannot write into {text}: {why}")
    return path
