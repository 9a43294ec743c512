"""libmongoc 1.23 against a real atomdb: runs the test_libmongoc program
(tests/drivers/c, built into <build>/tests/drivers/c/) in replica-set
discovery mode (replicaSet=rs0) and with directConnection=true, plain and
with each wire compressor."""

import subprocess

import pytest

from atomdb_testlib import atomdb_build_dir, require_installed

PROGRAM = atomdb_build_dir() / "tests" / "drivers" / "c" / "test_libmongoc"


@pytest.fixture(autouse=True)
def _program_built():
    require_installed(PROGRAM.exists(),
                      "%s (built by CMake when Debian's libmongoc-dev is installed)" % PROGRAM)

MODES = ["replicaSet=rs0", "directConnection=true"]


def run_program(server, options, *extra):
    proc = subprocess.run([str(PROGRAM), server.uri(options)] + list(extra),
                          capture_output=True, text=True, timeout=120)
    return proc, proc.stdout + proc.stderr


@pytest.mark.parametrize("mode", MODES)
def test_libmongoc_runs_ping_build_info_databases_create_drop_status_session(atomdb, mode):
    proc, output = run_program(atomdb, mode)
    assert "not ok" not in output, "every libmongoc check passes in %s mode:\n%s" % (mode, output)
    assert proc.returncode == 0, "test_libmongoc exits 0 in %s mode:\n%s" % (mode, output)
    for step in ("ping answers ok: 1", "buildInfo.version is 7.0.x", "listDatabases shows the new database",
                 "drop collection c_driver.things", "serverStatus has opcounters.command",
                 "ping inside the session answers ok: 1", "the server is an RSPrimary"):
        assert "ok - " + step in output, "libmongoc ran the check %r in %s mode:\n%s" % (step, mode, output)


@pytest.mark.parametrize("compressor", ["zlib", "zstd", "snappy"])
@pytest.mark.parametrize("mode", MODES)
def test_libmongoc_negotiates_each_compressor(atomdb, mode, compressor):
    proc, output = run_program(atomdb, mode + "&compressors=" + compressor, compressor)
    require_installed("Unsupported compressor" not in output,
                      "libmongoc built with %s (Debian's libmongoc-dev has zlib, zstd and snappy)"
                      % compressor)
    assert "not ok" not in output, "every libmongoc check passes with %s:\n%s" % (compressor, output)
    assert proc.returncode == 0, "test_libmongoc exits 0 with %s:\n%s" % (compressor, output)
    assert "ok - the handshake negotiated %s" % compressor in output, \
        "the handshake negotiated %s:\n%s" % (compressor, output)
