"""The ctypes mirrors of native structs (papcoll/native) agree with the C headers: for every
field Python declares, C's offset and size of the field of that name, and each struct's size.

The C side is the compiler's own answer: a small program, generated from the ctypes
declarations and compiled against native/*.h, prints offsetof and sizeof for each field. A
field added, removed, reordered or retyped on one side only fails here, instead of writing
into the wrong place at run time."""
import ctypes
import inspect
import shlex
import subprocess
import sysconfig
from pathlib import Path

import pytest

from papcoll.native import loops, plan, xport

NATIVE = Path(__file__).resolve().parent.parent / "native"

# ctypes class -> the C struct it mirrors
MIRRORS = {xport.XCallStruct: "pc_xcall", xport.Advert: "pc_advert",
           loops.Sources: "pc_sources", loops.Copies: "pc_copies",
           loops._Exchange: "pc_exchange", plan.PlanStruct: "pc_plan", plan.Step: "pc_step",
           plan.Task: "pc_task", plan.Sched: "pc_sched", plan.HierStruct: "pc_hier",
           plan.VShape: "pc_vshape"}


def test_every_mirror_is_checked():
    declared = {cls for module in (loops, plan, xport) for _, cls in inspect.getmembers(module)
                if isinstance(cls, type) and issubclass(cls, ctypes.Structure)
                and cls.__module__ == module.__name__}
    assert declared == set(MIRRORS), "a ctypes Structure without its C name in MIRRORS"


def c_layout(tmp_path):
    """{(struct, field): (offset, size)} and {(struct, ""): size}, as C compiles them."""
    lines = []
    for cls, name in MIRRORS.items():
        lines.append(f'printf("{name} . %zu 0\\n", sizeof(struct {name}));')
        for field, *_ in cls._fields_:
            lines.append(f'printf("{name} {field} %zu %zu\\n", offsetof(struct {name}, {field}),'
                         f' sizeof(((struct {name} *)0)->{field}));')
    source = tmp_path / "layout.c"
    source.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "papcoll_native.h"\n'
                      '#include "papcoll_plan.h"\nint main(void)\n{\n    '
                      + "\n    ".join(lines) + "\n    return 0;\n}\n")
    program = tmp_path / "layout"
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    subprocess.run([*cc, "-std=c11", f"-I{NATIVE}", str(source), "-o", str(program)],
                   check=True, capture_output=True)
    out = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    return {(s, f): (int(a), int(b)) for s, f, a, b in (line.split() for line in out.splitlines())}


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    return c_layout(tmp_path_factory.mktemp("layout"))


@pytest.mark.parametrize("cls", list(MIRRORS), ids=lambda cls: MIRRORS[cls])
def test_ctypes_mirror_matches_the_header(layout, cls):
    name = MIRRORS[cls]
    assert ctypes.sizeof(cls) == layout[name, "."][0], f"sizeof(struct {name})"
    for field, kind in cls._fields_:
        python = (getattr(cls, field).offset, ctypes.sizeof(kind))
        assert python == layout[name, field], f"struct {name}.{field}: (offset, size)"
