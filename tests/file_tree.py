"""Writing a tree of small text files (a stand-in /sys/fs/cgroup, /proc files) for the tests that read them."""

from pathlib import Path


def write_files(root: Path, files: dict[str, str]) -> None:
    """Each ``files`` item as the file ``root / name`` holding the text, its folders made."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
