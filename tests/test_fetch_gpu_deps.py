"""scripts/fetch_gpu_deps.py without network: slimming a synthetic wheel, and the one-wheel-per-distribution rule."""

import base64
import csv
import hashlib
import io
import sys
import zipfile
from pathlib import Path

import pytest
from tests import warm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import fetch_gpu_deps as fgd  # noqa: E402

FILES = {
    "toypkg/__init__.py": b"from toypkg import core\n",
    "toypkg/core.py": b"VALUE = 42\n",
    "toypkg/assets/keep.xml": b"<mujoco/>\n",
    "toypkg/big/a.bin": b"\0" * 5000,
    "toypkg/big/sub/b.bin": b"\1" * 5000,
    "toypkg/tests/data.txt": b"test data\n" * 100,
    "toypkg/bigger.png": b"\2" * 3000,
    "toypkg/bigger.png.keep": b"not under the dropped file\n",
}
DROP = ["toypkg/big/", "toypkg/tests", "toypkg/bigger.png"]
KEPT = ["toypkg/__init__.py", "toypkg/core.py", "toypkg/assets/keep.xml", "toypkg/bigger.png.keep"]


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def make_wheel(folder: Path) -> Path:
    """toypkg 1.0 as a wheel: a package, files under two dropped folders and one dropped file, and its dist-info."""
    info = "toypkg-1.0.dist-info"
    files = dict(FILES)
    files[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: toypkg\nVersion: 1.0\nRequires-Dist: numpy\n"
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows(_record_line(n, d) for n, d in files.items())
    writer.writerow([f"{info}/RECORD", "", ""])
    files[f"{info}/RECORD"] = buf.getvalue().encode()
    path = folder / "toypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def test_slim_wheel_drops_members_and_record_lines_and_is_idempotent(tmp_path):
    wheel = make_wheel(tmp_path)
    before, after = fgd.slim_wheel(wheel, DROP)
    assert before > after == wheel.stat().st_size
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None
        names = zf.namelist()
        record = [r[0] for r in csv.reader(io.StringIO(zf.read("toypkg-1.0.dist-info/RECORD").decode())) if r]
        assert zf.read("toypkg/core.py") == FILES["toypkg/core.py"]
    info = ["toypkg-1.0.dist-info/METADATA", "toypkg-1.0.dist-info/WHEEL", "toypkg-1.0.dist-info/RECORD"]
    assert sorted(names) == sorted(KEPT + info)
    assert sorted(record) == sorted(KEPT + info)
    assert [p.name for p in tmp_path.iterdir()] == [wheel.name]  # no temporary file left

    content = wheel.read_bytes()
    assert fgd.slim_wheel(wheel, DROP) == (after, after)
    assert wheel.read_bytes() == content


def test_slim_wheel_with_nothing_to_drop_leaves_the_file_alone(tmp_path):
    wheel = make_wheel(tmp_path)
    content = wheel.read_bytes()
    assert fgd.slim_wheel(wheel, ["otherpkg/"]) == (len(content), len(content))
    assert wheel.read_bytes() == content


def test_slimmed_wheel_installs_with_pip_no_index_no_deps_target(tmp_path):
    wheel = make_wheel(tmp_path)
    fgd.slim_wheel(wheel, DROP)
    site = tmp_path / "site"
    res = warm.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                          "--no-cache-dir", "--disable-pip-version-check", "--upgrade", "--target", str(site),
                          str(wheel)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (site / "toypkg/core.py").read_bytes() == FILES["toypkg/core.py"]
    assert not (site / "toypkg/big").exists() and not (site / "toypkg/bigger.png").exists()
    res = warm.run([sys.executable, "-c", "import toypkg; print(toypkg.core.VALUE)"], capture_output=True,
                   text=True, env={"PYTHONPATH": str(site)})
    assert res.stdout.strip() == "42", res.stderr


def test_prune_other_versions_keeps_one_wheel_per_distribution_and_other_files(tmp_path):
    names = ["mujoco-3.16.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
             "mujoco-3.17.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
             "mujoco-3.17.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
             "mujoco_mjx-3.17.0-py3-none-any.whl",  # another distribution whose name starts the same
             "dm_control-1.0.50-py3-none-any.whl", "PyOpenGL-3.1.9-py3-none-any.whl",
             "pyopengl-3.1.10-py3-none-any.whl", "README.txt", "mujoco-notes.txt"]
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    keep = "mujoco-3.17.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    assert fgd.prune_other_versions(tmp_path, "mujoco", keep) == sorted(names[:2])
    assert fgd.prune_other_versions(tmp_path, "PyOpenGL", "pyopengl-3.1.10-py3-none-any.whl") == [names[5]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(names) - {names[0], names[1], names[5]})


@pytest.mark.parametrize("filename, fits", [
    ("mujoco-3.17.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", True),
    ("mujoco-3.17.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", False),  # other Python
    ("mujoco-3.16.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", False),  # other version
    ("mujoco-3.17.0-cp312-cp312-macosx_11_0_arm64.whl", False),
    ("mujoco-3.17.0-py3-none-any.whl", True),
    ("mujoco-3.17.0-cp310-abi3-manylinux2014_x86_64.whl", True),
    ("mujoco-3.17.0-cp313-abi3-manylinux2014_x86_64.whl", False),
    ("mujoco-3.17.0.tar.gz", False),
])
def test_wheel_fits_the_target(filename, fits):
    assert fgd.wheel_fits(filename, "mujoco", "3.17.0", "3.12", fgd.PLATFORMS) is fits


def test_a_distribution_missing_here_without_pin_is_a_one_line_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(fgd, "FROM_LOCAL", ["surely-not-installed-dist"])
    assert fgd.main(["--dest", str(tmp_path / "w"), "--no-gl"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "surely-not-installed-dist" in err and "--pin" in err


def test_wheel_requires_reads_unconditional_requirements(tmp_path):
    wheel = tmp_path / "t-1.0-py3-none-any.whl"
    meta = ("Metadata-Version: 2.1\nName: t\nVersion: 1.0\nRequires-Dist: docstring-parser>=0.16\n"
            "Requires-Dist: eval-type-backport>=0.1.3; python_version < '3.10'\n"
            "Requires-Dist: shtab>=1.5.6; extra == 'dev'\n\nLong description. Requires-Dist: nothing\n")
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("t-1.0.dist-info/METADATA", meta)
    assert fgd.wheel_requires(wheel, "3.12") == ["docstring_parser"]
    assert fgd.wheel_requires(wheel, "3.9") == ["docstring_parser", "eval_type_backport"]
