"""README.md as a newcomer reads it: under 250 lines, every relative link
to a file that exists, and every fenced block marked ```sh runnable run as
written (bash, stopping at the first failing command) from the top of a copy
of the checkout whose build/ is the build under test. The copy is links to
the checkout's top-level entries, so what the commands write stays in it."""
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import BIN

SRC = Path(__file__).resolve().parents[2]
BUILD = Path(BIN).resolve().parents[2]  # BUILD/src/cli/offpath
README = SRC / "README.md"


def runnable_blocks(text):
    return re.findall(r"^```sh runnable\n(.*?)^```$", text, re.M | re.S)


def test_readme_is_short_and_its_links_exist():
    text = README.read_text()
    assert len(text.splitlines()) < 250
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert len(links) > 10
    missing = [l for l in links if not re.match(r"\w+://", l) and not (SRC / l).exists()]
    assert missing == []


def test_runnable_blocks_extracted():
    text = "x\n```sh runnable\na\nb\n```\n```sh\nnot this\n```\n```sh runnable\nc\n```\n"
    assert runnable_blocks(text) == ["a\nb\n", "c\n"]
    assert len(runnable_blocks(README.read_text())) >= 1


@pytest.fixture(scope="module")
def clone():
    if not (BUILD / "build.ninja").exists():
        pytest.skip(f"{BIN} is not in a meson build folder")
    with tempfile.TemporaryDirectory(prefix="offpath-readme-") as d:
        for entry in SRC.iterdir():
            if not entry.name.startswith("build") and entry.name != ".git":
                os.symlink(entry, Path(d) / entry.name)
        os.symlink(BUILD, Path(d) / "build")
        yield Path(d)


@pytest.mark.parametrize("i", range(len(runnable_blocks(README.read_text()))))
def test_runnable_block(clone, i):
    block = runnable_blocks(README.read_text())[i]
    # a newcomer's shell: no test settings, not inside make test's make
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OFFPATH_") and k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["PWD"] = str(clone)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=clone, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"README block {i}:\n{block}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
