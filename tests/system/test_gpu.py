"""gpunetio_write_bw: OpenCL work-items or Vulkan invocations post RDMA WRITEs
into a work queue in shared memory, offpath's engine executes them on an RC QP
to a perftest-style server, which checks every byte of every work-item's slot.
Each case runs once per API: the real kernels on PoCL's CPU device and the real
shaders on Mesa's lavapipe (scripts/bootstrap installs both); a case skips only
where the build or the machine has no device of that API."""
import json
import re

import pytest

from conftest import BIN, check_ok, counters, run_server_client

_port = [29200]  # below the ephemeral ports (32768-60999)
LINE = "-" * 87
NO_DEVICE = ("built without OpenCL", "no OpenCL platform", "built without Vulkan",
             "no Vulkan device")
APIS = ["opencl", "vulkan"]
TITLE = {"opencl": "OpenCL", "vulkan": "Vulkan"}


def run_pair(args, client_args=(), timeout=300, cwd=None, api=None):
    _port[0] += 1
    server = [BIN, "gpunetio_write_bw", "-p", _port[0], *args]
    client = server + (["--api", api] if api else []) + list(client_args) + ["127.0.0.1"]
    server_res, client_res = run_server_client(server, client, timeout=timeout, cwd=cwd)
    if any(s in client_res[2] for s in NO_DEVICE):
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


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("threads,mode,size,iters", [
    (1, "thread", 2, 300),
    (1, "batch", 65536, 20),
    (64, "thread", 4096, 20),
    (64, "batch", 1000, 20),
    (1024, "batch", 1 << 20, 5),
    (1024, "thread", 2, 1000),  # 1,024,000 writes
    (1024, "batch", 2, 1000),
])
def test_device_posted_writes_land(threads, mode, size, iters, api):
    server, client = run_pair(["--threads", threads, "--mode", mode, "-s", size, "-n", iters],
                              api=api)
    check_ok(server, "server")
    check_ok(client, "client")
    out = client[1]
    assert re.search(rf"{TITLE[api]} device: .+, {threads} work-items, {mode} mode", out), out
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
@pytest.mark.parametrize("api", APIS)
def test_protection_errors_write_nothing(fault, what, mode, api):
    """The device posts with a key not the server's, or past its region: the
    writes complete with the remote access error and the server finds its
    whole target untouched."""
    server, client = run_pair(["--threads", 64, "--mode", mode, "-s", 1000, "-n", 10,
                               f"--inject_fault={fault}"], api=api)
    check_ok(server, "server")
    check_ok(client, "client")
    assert " offpath: data check ok (nothing written)" in server[1], server[1]
    assert " offpath: data check ok (nothing written)" in client[1], client[1]
    polled = (r", (\d+) seen by the device code$" if mode == "thread"
              else r" \(batch: the device code polls none\)$")
    m = re.search(rf"^ offpath: injected fault \({what}\): device-posted writes completed with "
                  r"REM_ACCESS_ERR, (\d+) error completions" + polled, client[1], re.M)
    assert m and int(m.group(1)) >= 1, client[1]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("slots,mode", [(1, "batch"), (5, "thread")])
def test_slots(slots, mode, api):
    """--slots n: every write goes to one of n slots (1: ib_write_bw's single
    buffer); the server's target holds n slots and it checks each byte, so a
    client writing to more slots would hit past the region (REM_ACCESS_ERR)
    and one writing to fewer would leave bytes the check finds."""
    server, client = run_pair(["--threads", 64, "--mode", mode, "-s", 3000, "-n", 20,
                               "--slots", slots], api=api)
    check_ok(server, "server")
    check_ok(client, "client")
    rows = bw_rows(client[1])
    assert len(rows) == 1 and rows[0][:2] == ["3000", "20"], rows


def test_slots_flag_errors():
    import subprocess
    r = subprocess.run([BIN, "gpunetio_write_bw", "--threads", "64", "--slots", "65"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert "--slots 65: at most one per work-item (--threads 64)" in r.stderr, r.stderr
    r = subprocess.run([BIN, "gpunetio_write_bw", "--slots", "0"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "--slots" in r.stderr, r.stderr
    r = subprocess.run([BIN, "ib_write_bw", "--slots", "4"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "gpunetio_write_bw's" in r.stderr, r.stderr
    server, client = run_server_client([BIN, "gpunetio_write_bw", "-p", 29190, "--threads", 8,
                                        "--slots", 2],
                                       [BIN, "gpunetio_write_bw", "-p", 29190, "--threads", 8,
                                        "--slots", 4, "127.0.0.1"], timeout=60)
    assert client[0] != 0 and "disagree on --slots" in client[2], client


@pytest.mark.parametrize("placement", ["device", "host"])
def test_vulkan_memory_placement(placement):
    """--gpu_memory: the run is checked byte for byte where `gpu list` names a
    memory type for the placement, and refused naming it where it names none
    (lavapipe's one type is device-local: 'host' is refused here; a discrete
    GPU has both)."""
    import subprocess
    listed = json.loads(subprocess.run([BIN, "gpu", "list", "--json"], capture_output=True,
                                       text=True, timeout=60).stdout)["devices"]
    vk = [d for d in listed if d["api"] == "vulkan" and d["device"] == 0 and d["can_run_queue"]]
    if not vk:
        pytest.skip("no Vulkan device")
    server, client = run_pair(["--threads", 64, "--mode", "batch", "-s", 4096, "-n", 20],
                              client_args=["--gpu_memory", placement], api="vulkan")
    if f"{placement}: -" in vk[0]["memory"]:
        assert client[0] != 0 and f"memory placement '{placement}'" in client[2], client
        return
    check_ok(server, "server")
    check_ok(client, "client")
    assert bw_rows(client[1])[0][:2] == ["4096", "20"]
    r = subprocess.run([BIN, "ib_write_bw", "--gpu_memory", placement, "127.0.0.1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--gpu_memory needs --use_vulkan" in r.stderr, r.stderr


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
@pytest.mark.parametrize("use,banner", [("--use_opencl=0,0", " OpenCL SVM buffers: "),
                                        ("--use_vulkan=0", " Vulkan host-coherent buffers: ")])
def test_gpu_buffers(tool, touch, use, banner):
    """perftest's --use_opencl, and --use_vulkan beside it: both sides' buffers
    in the device's shared memory, registered as memory regions; --gpu_touch
    has the device read them meanwhile."""
    _port[0] += 1
    cmd = [BIN, tool, "-p", _port[0], use, f"--gpu_touch={touch}", "-s", 65536, "-n", 300]
    server, client = run_server_client(cmd, cmd + ["127.0.0.1"], timeout=300)
    if any(s in client[2] for s in NO_DEVICE):
        pytest.skip(client[2].strip())
    for side, name in ((server, "server"), (client, "client")):
        check_ok(side, name)
        assert banner in side[1], side[1]
        c = counters(side[1])
        assert c["gpu_touch_passes"] >= 1, c
        if touch == "once":
            assert c["gpu_touch_passes"] == 1, c


def test_gpu_touch_needs_use_opencl():
    import subprocess
    r = subprocess.run([BIN, "ib_write_bw", "--gpu_touch=once"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--gpu_touch needs --use_opencl or --use_vulkan" in r.stderr, \
        r.stderr


def test_api_flags():
    import subprocess
    r = subprocess.run([BIN, "gpunetio_write_bw", "--api", "cuda"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "--api: expected opencl or vulkan" in r.stderr, r.stderr
    r = subprocess.run([BIN, "ib_write_bw", "--device", "1"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--use_vulkan" in r.stderr, r.stderr
    r = subprocess.run([BIN, "ib_write_bw", "--use_vulkan=16"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--use_vulkan" in r.stderr, r.stderr


def test_device_out_of_range_is_named():
    server, client = run_pair(["-s", 64, "-n", 5], client_args=["--device", "9"], api="vulkan")
    assert client[0] != 0
    assert "--api vulkan --device 9: Vulkan device 9: out of range" in client[2], client[2]


def test_gpu_list():
    import subprocess
    r = subprocess.run([BIN, "gpu", "list", "--json"], capture_output=True, text=True, timeout=60)
    devices = json.loads(r.stdout)["devices"]
    runs = [d for d in devices if d["can_run_queue"]]
    assert r.returncode == (0 if runs else 1), r
    for d in devices:
        assert d["api"] in APIS and d["name"] and d["memory"], d
        assert d["can_run_queue"] == (d["missing"] == ""), d
    text = subprocess.run([BIN, "gpu", "list"], capture_output=True, text=True, timeout=60)
    for d in devices:
        assert d["name"] in text.stdout, text.stdout
    bad = subprocess.run([BIN, "gpu", "show"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "expected the command 'list'" in bad.stderr, bad.stderr


@pytest.mark.parametrize("mode", ["thread", "batch"])
@pytest.mark.parametrize("api", APIS)
def test_mixed_with_cpu_posted_writes(mode, api):
    """The host posts its own writes on the QP the engine feeds, between the
    device's: each side gets its own completions, every byte lands."""
    server, client = run_pair(["--threads", 64, "--mode", mode, "-s", 4096, "-n", 50],
                              client_args=["--cpu_writes", 2000], api=api)
    check_ok(server, "server")
    check_ok(client, "client")
    assert (" offpath: 2000 CPU-posted and 3200 device-posted writes completed on the same QP"
            in client[1]), client[1]
