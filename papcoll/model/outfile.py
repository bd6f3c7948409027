"""Output files of the model's commands and of the benchmarks, checked as argparse reads them."""
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
