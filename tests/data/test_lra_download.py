"""Downloads against a local HTTP server (in a thread) and file:// URLs; never the internet."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ssmrepro.cli.data import app
from ssmrepro.data import load_lra
from ssmrepro.data.download import DownloadError, download_file, extract_archive

PAYLOAD = np.random.default_rng(0).integers(0, 256, size=300_000, dtype=np.uint8).tobytes()
SHA = hashlib.sha256(PAYLOAD).hexdigest()


class _Server:
    """Serves ``files`` (path -> bytes); Range support and truncation are switchable."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.requests: list[dict[str, str]] = []
        self.honor_range = True
        self.truncate_at: int | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                server.requests.append(dict(self.headers))
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng and server.honor_range:
                    start = int(rng.split("=")[1].split("-")[0])
                    if start >= len(body):  # (with the size, as RFC 9110 says)
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                chunk = body[start:]
                if server.truncate_at is not None:
                    chunk = chunk[: server.truncate_at]
                self.wfile.write(chunk)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    s.files["/blob.bin"] = PAYLOAD
    yield s
    s.close()


def test_http_download_with_checksum(server, tmp_path):
    dest = download_file(server.url("/blob.bin"), tmp_path / "blob.bin", sha256=SHA, progress=False)
    assert dest.read_bytes() == PAYLOAD and not (tmp_path / "blob.bin.part").exists()
    # already present and verified: no new request
    n = len(server.requests)
    download_file(server.url("/blob.bin"), dest, sha256=SHA, progress=False)
    assert len(server.requests) == n


def test_http_resume_of_partial_file(server, tmp_path):
    (tmp_path / "blob.bin.part").write_bytes(PAYLOAD[:123_456])
    dest = download_file(
        server.url("/blob.bin"), tmp_path / "blob.bin", sha256=SHA, size=len(PAYLOAD), progress=False
    )
    assert dest.read_bytes() == PAYLOAD
    assert server.requests[-1]["Range"] == "bytes=123456-"


def test_interrupted_transfer_then_resume(server, tmp_path):
    server.truncate_at = 100_000
    with pytest.raises(DownloadError, match="re-run the same command to resume"):
        download_file(server.url("/blob.bin"), tmp_path / "blob.bin", sha256=SHA, progress=False)
    assert (tmp_path / "blob.bin.part").stat().st_size == 100_000
    server.truncate_at = None
    dest = download_file(server.url("/blob.bin"), tmp_path / "blob.bin", sha256=SHA, progress=False)
    assert dest.read_bytes() == PAYLOAD and server.requests[-1]["Range"] == "bytes=100000-"


def test_server_without_range_support_restarts(server, tmp_path):
    server.honor_range = False
    (tmp_path / "blob.bin.part").write_bytes(b"garbage" * 1000)
    dest = download_file(server.url("/blob.bin"), tmp_path / "blob.bin", sha256=SHA, progress=False)
    assert dest.read_bytes() == PAYLOAD


def test_file_url_with_resume(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(PAYLOAD)
    (tmp_path / "out.bin.part").write_bytes(PAYLOAD[:5000])
    dest = download_file(src.as_uri(), tmp_path / "out.bin", sha256=SHA, size=len(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD


def test_checksum_mismatch_is_a_clear_error(server, tmp_path):
    with pytest.raises(DownloadError) as err:
        download_file(server.url("/blob.bin"), tmp_path / "blob.bin", sha256="0" * 64, progress=False)
    msg = str(err.value)
    assert "sha256 mismatch" in msg and "expected " + "0" * 64 in msg and SHA in msg
    assert not (tmp_path / "blob.bin").exists() and not (tmp_path / "blob.bin.part").exists()
    with pytest.raises(DownloadError, match="md5 mismatch"):
        download_file(server.url("/blob.bin"), tmp_path / "b2", md5="1" * 32, progress=False)
    with pytest.raises(DownloadError, match="expected 5"):
        download_file(server.url("/blob.bin"), tmp_path / "b3", size=5, progress=False)
    with pytest.raises(DownloadError, match="HTTP 404"):
        download_file(server.url("/missing"), tmp_path / "b4", progress=False)


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _tree(root: Path, prefix: str) -> dict[str, bytes]:
    return {
        f"{prefix}/{p.relative_to(root).as_posix()}": p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_extract_skips_unsafe_members(tmp_path):
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(_tar_gz({"ok/x.txt": b"x", "../evil.txt": b"e", "/abs.txt": b"a"}))
    extract_archive(archive, tmp_path / "out", progress=False)
    assert (tmp_path / "out" / "ok" / "x.txt").read_bytes() == b"x"
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "out" / "abs.txt").exists()


def test_cli_download_cifar10_over_http(server, lra_root, tmp_path):
    blob = _tar_gz(_tree(lra_root / "cifar-10-batches-py", "cifar-10-batches-py"))
    server.files["/cifar-10-python.tar.gz"] = blob
    root = tmp_path / "data"
    url = server.url("/cifar-10-python.tar.gz")
    bad = CliRunner().invoke(
        app, ["download", "cifar10", "--dir", str(root), "--url", url, "--sha256", "f" * 64, "--no-progress"]
    )
    assert bad.exit_code == 1 and "sha256 mismatch" in bad.output
    sha = hashlib.sha256(blob).hexdigest()
    r = CliRunner().invoke(
        app, ["download", "cifar10", "--dir", str(root), "--url", url, "--sha256", sha, "--no-progress"]
    )
    assert r.exit_code == 0, r.output
    assert (root / "downloads" / "cifar-10-python.tar.gz").exists()
    ds = load_lra("image", "test", root=root)
    assert ds.source == "download:cifar10" and len(ds) == 2
    again = CliRunner().invoke(
        app, ["download", "cifar10", "--dir", str(root), "--url", url, "--no-progress"]
    )
    assert again.exit_code == 1 and "--force" in again.output


def test_cli_download_lra_from_file_url(lra_root, tmp_path):
    members = {}
    for name in ("listops-1000", "tsv_data", "pathfinder32"):
        members.update(_tree(lra_root / "lra" / name, f"lra_release/lra_release/{name}"))
    members["lra_release/README"] = b"not a task folder"
    archive = tmp_path / "mirror" / "lra_release.gz"
    archive.parent.mkdir()
    archive.write_bytes(_tar_gz(members))
    root = tmp_path / "data"
    r = CliRunner().invoke(
        app,
        [
            "download",
            "lra",
            "--dir",
            str(root),
            "--url",
            archive.as_uri(),
            "--delete-archive",
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (root / "lra").iterdir()) == ["listops-1000", "pathfinder32", "tsv_data"]
    assert not (root / "downloads" / "lra_release.gz").exists()
    for task in ("listops", "retrieval", "pathfinder"):
        assert load_lra(task, "train", root=root).source == "lra_release"


def test_cli_download_imdb_skips_unsup(lra_root, tmp_path):
    members = _tree(lra_root / "imdb" / "aclImdb", "aclImdb")
    members["aclImdb/train/unsup/0_0.txt"] = b"unlabelled"
    archive = tmp_path / "aclImdb_v1.tar.gz"
    archive.write_bytes(_tar_gz(members))
    root = tmp_path / "data"
    r = CliRunner().invoke(
        app, ["download", "imdb", "--dir", str(root), "--url", archive.as_uri(), "--no-progress"]
    )
    assert r.exit_code == 0, r.output
    assert not (root / "imdb" / "aclImdb" / "train" / "unsup").exists()
    assert load_lra("text", "train", root=root).source == "download:imdb"


def test_a_partial_download_larger_than_the_file_there_now_starts_over(tmp_path):
    """The file at the URL replaced by a smaller one while a partial download of the old one
    was kept: the server's 416 (range not satisfiable) was read as 'we already have
    everything', and the old file's bytes were installed as the new file. A 416 naming another
    size (bytes */N) starts over."""
    server = _Server()
    try:
        server.files["/a.bin"] = PAYLOAD[:3000]
        url, dest = server.url("/a.bin"), tmp_path / "a.bin"
        dest.with_name("a.bin.part").write_bytes(PAYLOAD[:6000][::-1])  # the old, larger one's
        dest.with_name("a.bin.part.url").write_text(url)
        assert download_file(url, dest, progress=False).read_bytes() == PAYLOAD[:3000]
    finally:
        server.close()


def test_r53d_an_archive_in_the_downloads_folder_named_by_url_is_installed_and_kept(lra_root,
                                                                                   tmp_path):
    """`--url file:///<root>/downloads/lra_release.gz` (the archive put there by hand) deleted
    it as an earlier download's copy, then failed with 'no such file': it is installed from
    where it lies and kept, --delete-archive notwithstanding (the user's file, not a copy)."""
    members = {}
    for name in ("listops-1000",):
        members.update(_tree(lra_root / "lra" / name, f"lra_release/lra_release/{name}"))
    root = tmp_path / "data"
    archive = root / "downloads" / "lra_release.gz"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(_tar_gz(members))
    r = CliRunner().invoke(app, ["download", "lra", "--dir", str(root), "--url", archive.as_uri(),
                                 "--delete-archive", "--no-progress"])
    assert r.exit_code == 0, r.output
    assert (root / "lra" / "listops-1000").is_dir() and archive.is_file()
