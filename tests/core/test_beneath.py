"""core.beneath: a path an agent can write is resolved from a folder fd with no symlink followed —
with the kernel's openat2 and with the walk of O_NOFOLLOW opens it falls back to, both."""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

import pytest

from workflow.core import beneath

KERNELS = [pytest.param(False, id="walk")] + ([pytest.param(True, id="openat2")] if beneath.kernel_resolves() else [])


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    top, owner = tmp_path / "project", tmp_path / "owner"
    (top / "specs" / "todo" / "d").mkdir(parents=True)
    (top / "specs" / "todo" / "d" / "x.md").write_text("mine\n")
    owner.mkdir()
    (owner / "x.md").write_text("OWNER\n")
    os.symlink(owner, top / "specs" / "todo" / "link")
    os.symlink(owner / "x.md", top / "specs" / "todo" / "file-link.md")
    return top, owner


@pytest.mark.parametrize("kernel", KERNELS)
def test_no_symlink_is_followed_anywhere_on_the_way(tree: tuple[Path, Path], kernel: bool) -> None:
    top, owner = tree
    with beneath.folder(top, "specs/todo/d", kernel=kernel) as fd:
        assert os.listdir(fd) == ["x.md"]
    for rel in ("specs/todo/link", "specs/todo/link/sub"):
        with pytest.raises(beneath.UnreachableError), beneath.folder(top, rel, kernel=kernel):
            pass
    with pytest.raises(beneath.UnreachableError):
        beneath.read(top, "specs/todo/link/x.md", 100)
    with pytest.raises(beneath.UnreachableError):
        beneath.read(top, "specs/todo/file-link.md", 100)
    assert beneath.read(top, "specs/todo/d/x.md", 100) == (b"mine\n", 5)
    assert beneath.lstat(top, "specs/todo/link/x.md") is None
    assert beneath.through_link(top, "specs/todo/link/x.md") and not beneath.through_link(top, "specs/todo/d/none")


def test_paths_are_judged_by_their_text_first() -> None:
    for bad in ("", "/etc/passwd", "specs/../x", "specs/./x", "specs//x", "specs/x\0", "a\\b"):
        with pytest.raises(beneath.ArtifactError):
            beneath.parts(bad)


def test_writes_renames_and_removals_never_go_through_a_link(tree: tuple[Path, Path]) -> None:
    top, owner = tree
    with pytest.raises(beneath.UnreachableError):
        beneath.write(top, "specs/todo/link/x.md", b"HOOK")
    with pytest.raises(beneath.UnreachableError):
        beneath.write(top, "specs/todo/file-link.md", b"HOOK")  # the link is not replaced, nor written through
    with pytest.raises(beneath.UnreachableError):
        beneath.rename(top, "specs/todo/d/x.md", "specs/todo/link/y.md")
    assert beneath.remove(top, "specs/todo/file-link.md")  # the link itself goes
    assert (owner / "x.md").read_text() == "OWNER\n" and sorted(os.listdir(owner)) == ["x.md"]
    beneath.write(top, "specs/doing/new/y.md", b"made")
    assert (top / "specs" / "doing" / "new" / "y.md").read_bytes() == b"made"
    with pytest.raises(FileExistsError):
        beneath.rename(top, "specs/doing/new/y.md", "specs/todo/d/x.md")  # never over what is there
    beneath.rename(top, "specs/doing/new/y.md", "specs/done/y.md")
    assert (top / "specs" / "done" / "y.md").read_bytes() == b"made"


def test_a_fifo_never_blocks_a_read(tree: tuple[Path, Path]) -> None:
    top, _ = tree
    os.mkfifo(top / "specs" / "todo" / "fifo.md")
    with pytest.raises(beneath.UnreachableError):
        beneath.read(top, "specs/todo/fifo.md", 100)
    with pytest.raises(beneath.UnreachableError):
        beneath.write(top, "specs/todo/fifo.md", b"x")


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_folder_swapped_for_a_link_in_a_loop_is_never_gone_through(tree: tuple[Path, Path], kernel: bool) -> None:
    top, owner = tree
    libc = ctypes.CDLL(None, use_errno=True)
    a, b = os.fsencode(top / "specs/todo/d"), os.fsencode(top / "specs/todo/link")
    stop = threading.Event()
    swaps = [0]

    def swap() -> None:
        while not stop.is_set():
            if libc.renameat2(-100, a, -100, b, 2) == 0:
                swaps[0] += 1

    t = threading.Thread(target=swap)
    t.start()
    seen: set[bytes] = set()
    try:
        for _ in range(3000):
            try:
                with beneath.folder(top, "specs/todo/d", kernel=kernel) as fd:
                    f = os.open("x.md", os.O_RDONLY, dir_fd=fd)
                    seen.add(os.read(f, 100))
                    os.close(f)
                beneath.write(top, "specs/todo/d/x.md", b"mine\n", durable=False)
            except beneath.UnreachableError:
                pass
    finally:
        stop.set()
        t.join()
    assert swaps[0] > 100
    assert seen <= {b"mine\n"} and (owner / "x.md").read_text() == "OWNER\n"
    assert sorted(os.listdir(owner)) == ["x.md"]
