"""gpunetio_write_bw: OpenCL work-items post RDMA WRITEs into a work queue in
SVM, offpath's engine executes them on an RC QP to a perftest-style server,
which checks every byte of every work-item's slot. Runs the real kernels on
PoCL's CPU device (scripts/bootstrap installs it); skips only where the build
or the machine has no OpenCL platform."""
import json
import re

import pytest

from conftest import BIN, check_ok, counters, run_server_client

_port = [46200]
LINE = "-" * 87
NO_OPENCL = ("built without OpenCL", "no OpenCL platform")


def run_pair(args, client_args=(), timeout=300, cwd=None):
    _port[0] += 1
    server = [BIN, "gpunetio_write_bw", "-p", _port[0], *args]
    server_res, client_res = run_server_client(
        server, server + list(client_args) + ["127.0.0.1"], timeout=timeout, cwd=cwd)
    if any(s in client_res[2] for s in NO_OPENCL):
        pytest.skip(client_res[2].strip())
    return server_res, client_res


def bw_rows(out):
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(" #bytes"))
    rows = []
    for l in lines[start + 1:]:
        if l == LINE:
            break
        if l.startswith(" post latency"):
            continue
        rows.append(l.split())
    return rows


@pytest.mark.parametrize("threads,mode,size,iters", [
    (1, "thread", 2, 300),
    (1, "batch", 65536, 20),
    (64, "thread", 4096, 20),
    (64, "batch", 1000, 20),
    (1024, "batch", 1 << 20, 5),
    (1024, "thread", 2, 1000),  # 1,024,000 writes
    (1024, "batch", 2, 1000),
])
def test_device_posted_writes_land(threads, mode, size, iters):
    server, client = run_pair(["--threads", threads, "--mode", mode, "-s", size, "-n", iters])
    check_ok(server, "server")
    check_ok(client, "client")
    out = client[1]
    assert re.search(rf"OpenCL device: .+, {threads} work-items, {mode} mode", out), out
    m = re.search(rf"^ post latency per batch of {threads} writes: ([0-9.]+) us \((\d+) launches\)$",
                  out, re.M)
    assert m and float(m.group(1)) > 0 and int(m.group(2)) >= 1, out
    rows = bw_rows(out)
    assert len(rows) == 1 and rows[0][0] == str(size) and rows[0][1] == str(iters), rows
    assert float(rows[0][3]) > 0
    # the message rate counts every work-item's writes: threads x iters over the run
    assert float(rows[0][4]) > 0
    assert bw_rows(server[1]) == rows  # the server shows the client's figures


def test_all_sizes_json(tmp_path):
    out = tmp_path / "client.json"
    server, client = run_pair(["--threads", 4, "-a", "-n", 5], client_args=["--out_json_file", out])
    check_ok(server, "server")
    check_ok(client, "client")
    rows = bw_rows(client[1])
    assert [int(r[0]) for r in rows] == [2 ** k for k in range(1, 24)]
    report = json.loads(out.read_text())
    assert report["test_info"]["test"] == "RDMA_Write BW Test"
    assert [r["MsgSize"] for r in report["results"]] == [2 ** k for k in range(1, 24)]
    assert all(r["n_iterations"] == 5 and r["BW_average"] > 0 for r in report["results"])


@pytest.mark.parametrize("fault,what", [("rkey", "bad rkey"),
                                        ("range", "address past the region")])
@pytest.mark.parametrize("mode", ["thread", "batch"])
def test_protection_errors_write_nothing(fault, what, mode):
    """The device posts with a key not the server's, or past its region: the
    writes complete with the remote access error and the server finds its
    whole target untouched."""
    server, client = run_pair(["--threads", 64, "--mode", mode, "-s", 1000, "-n", 10,
                               f"--inject_fault={fault}"])
    check_ok(server, "server")
    check_ok(client, "client")
    assert " offpath: data check ok (nothing written)" in server[1], server[1]
    assert " offpath: data check ok (nothing written)" in client[1], client[1]
    m = re.search(rf"^ offpath: injected fault \({what}\): device-posted writes completed with "
                  r"REM_ACCESS_ERR, (\d+) error completions, (\d+) seen by the device code$",
                  client[1], re.M)
    assert m and int(m.group(1)) >= 1, client[1]


def test_flags_belong_to_gpunetio():
    import subprocess
    r = subprocess.run([BIN, "ib_write_bw", "--threads", "8"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "gpunetio_write_bw's" in r.stderr, r.stderr
    r = subprocess.run([BIN, "gpunetio_write_bw", "--threads", "300"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "multiple of 256" in r.stderr, r.stderr
    r = subprocess.run([BIN, "gpunetio_write_bw", "--mode", "warp"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "--mode" in r.stderr, r.stderr
    r = subprocess.run([BIN, "gpunetio_write_bw", "--inject_fault=rkey", "--cpu_writes", "5"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "flushes the host's writes" in r.stderr, r.stderr
    r = subprocess.run([BIN, "gpunetio_write_bw", "--inject_fault=range", "-a"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "error state" in r.stderr, r.stderr


@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_read_bw", "ib_send_bw"])
@pytest.mark.parametrize("touch", ["once", "infinite"])
def test_use_opencl_buffers(tool, touch):
    """perftest's --use_opencl: both sides' buffers in OpenCL SVM, registered
    as memory regions; --gpu_touch has the device read them meanwhile."""
    _port[0] += 1
    cmd = [BIN, tool, "-p", _port[0], "--use_opencl=0,0", f"--gpu_touch={touch}", "-s", 65536,
           "-n", 300]
    server, client = run_server_client(cmd, cmd + ["127.0.0.1"], timeout=300)
    if any(s in client[2] for s in NO_OPENCL):
        pytest.skip(client[2].strip())
    for side, name in ((server, "server"), (client, "client")):
        check_ok(side, name)
        assert " OpenCL SVM buffers: " in side[1], side[1]
        c = counters(side[1])
        assert c["gpu_touch_passes"] >= 1, c
        if touch == "once":
            assert c["gpu_touch_passes"] == 1, c


def test_gpu_touch_needs_use_opencl():
    import subprocess
    r = subprocess.run([BIN, "ib_write_bw", "--gpu_touch=once"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--gpu_touch needs --use_opencl" in r.stderr, r.stderr


@pytest.mark.parametrize("mode", ["thread", "batch"])
def test_mixed_with_cpu_posted_writes(mode):
    """The host posts its own writes on the QP the engine feeds, between the
    device's: each side gets its own completions, every byte lands."""
    server, client = run_pair(["--threads", 64, "--mode", mode, "-s", 4096, "-n", 50],
                              client_args=["--cpu_writes", 2000])
    check_ok(server, "server")
    check_ok(client, "client")
    assert (" offpath: 2000 CPU-posted and 3200 device-posted writes completed on the same QP"
            in client[1]), client[1]
