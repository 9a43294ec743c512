"""The Debian package (issue 22): scripts/package-deb.sh builds
atomdb_<version>_<arch>.deb around the binary under test, lintian finds no
error in it, `dpkg-deb -c` shows the files, Depends names the shared
libraries, and the packaged binary and config start atomdb the way the
systemd unit's ExecStart line does — with NOTIFY_SOCKET set, as systemd
runs a Type=notify service, so READY=1 and STOPPING=1 are checked too
(systemd is not PID 1 here, so the line is run directly).
"""

import re
import shutil
import signal
import socket
import subprocess

import pymongo
import pytest

from atomdb_testlib import REPO, atomdb_bin, free_port, require_installed

SCRIPT = REPO / "scripts" / "package-deb.sh"


def cmake_version():
    m = re.search(r"^project\(atomdb VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text(), re.M)
    return m.group(1)


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    for tool in ("dpkg-deb", "dpkg-shlibdeps", "lintian"):
        require_installed(shutil.which(tool), tool)
    out = tmp_path_factory.mktemp("deb")
    r = subprocess.run(["bash", str(SCRIPT), "--binary", str(atomdb_bin()), str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "lintian found no errors" in r.stdout
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()
    path = out / ("atomdb_%s_%s.deb" % (cmake_version(), arch))
    assert path.exists(), "the package is named atomdb_<version>_<arch>.deb"
    return path


def test_package_holds_the_binary_config_unit_and_man_page(deb):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    for f in ("./usr/bin/atomdb", "./etc/atomdb/atomdb.conf",
              "./lib/systemd/system/atomdb.service", "./usr/share/man/man1/atomdb.1.gz",
              "./usr/share/doc/atomdb/copyright", "./usr/share/doc/atomdb/changelog.gz"):
        assert f in listing, "%s is in the package" % f
    assert re.search(r"-rwxr-xr-x root/root .* \./usr/bin/atomdb", listing), "owned by root, 0755"


def test_package_depends_on_the_shared_libraries(deb):
    depends = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True,
                             text=True, check=True).stdout
    for lib in ("libbson-1.0-0", "libuv1", "libmicrohttpd12", "libsystemd0", "libc6", "adduser"):
        assert lib in depends, "Depends names %s: %s" % (lib, depends)


def test_config_file_is_a_conffile(deb, tmp_path):
    subprocess.run(["dpkg-deb", "-e", str(deb), str(tmp_path / "ctl")], check=True)
    assert (tmp_path / "ctl" / "conffiles").read_text().split() == ["/etc/atomdb/atomdb.conf"]
    md5 = (tmp_path / "ctl" / "md5sums").read_text()
    assert "usr/bin/atomdb" in md5


def unit_fields(text):
    fields = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            fields[k.strip()] = v.strip()
    return fields


def test_packaged_unit_starts_atomdb_and_notifies_systemd(deb, tmp_path):
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    unit = unit_fields((root / "lib/systemd/system/atomdb.service").read_text())
    assert unit["Type"] == "notify" and unit["User"] == "atomdb"
    assert unit["StateDirectory"] == "atomdb" and unit["ProtectSystem"] == "strict"
    argv = unit["ExecStart"].split()
    assert argv[0] == "/usr/bin/atomdb" and argv[1:3] == ["--config", "/etc/atomdb/atomdb.conf"]
    # the packaged files under the temporary root; the data directory and the
    # port moved (the config's /var/lib/atomdb and 27017 are the machine's)
    conf = (root / "etc/atomdb/atomdb.conf").read_text()
    assert "dbPath: /var/lib/atomdb" in conf and "port: 27017" in conf
    port = free_port()
    conf = conf.replace("/var/lib/atomdb", str(tmp_path / "data")).replace(
        "port: 27017", "port: %d" % port)
    (root / "etc/atomdb/atomdb.conf").write_text(conf)
    (tmp_path / "data").mkdir()
    argv = [str(root) + argv[0], argv[1], str(root) + argv[2]]

    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify_path = str(tmp_path / "notify.sock")
    notify.bind(notify_path)
    notify.settimeout(30)
    log = open(tmp_path / "out.log", "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                            env={"NOTIFY_SOCKET": notify_path, "PATH": "/usr/bin:/bin"})
    try:
        ready = notify.recv(4096).decode()
        assert "READY=1" in ready and "MAINPID=%d" % proc.pid in ready, ready
        c = pymongo.MongoClient("127.0.0.1", port, directConnection=True,
                                serverSelectionTimeoutMS=10000)
        assert c.admin.command("ping")["ok"] == 1.0
        c.t.c.insert_one({"packaged": True})
        assert c.admin.command("getCmdLineOpts")["parsed"]["storage"]["dbPath"] == \
            str(tmp_path / "data")
        c.close()
        proc.send_signal(signal.SIGTERM)
        stopping = notify.recv(4096).decode()
        assert "STOPPING=1" in stopping, stopping
        assert proc.wait(timeout=30) == 0, (tmp_path / "out.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        notify.close()
        log.close()
    assert any((tmp_path / "data").iterdir()), "the data went to the configured dbPath"
