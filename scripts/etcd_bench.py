#!/usr/bin/env python3
"""The store's write speed beside etcd's, measured side by side on this machine.

    python3 scripts/etcd_bench.py --compare                  # store bench vs etcd, 1/16/64 clients
    python3 scripts/etcd_bench.py --members 3 --concurrency 16 --duration 10   # etcd alone

The same load for both: `--concurrency` connections, each writing `--value-size`-byte values
to 10,000 keys one request at a time, for `--duration` seconds. The store's side is
`replicheck store bench` (3 nodes, replication factor 3, write quorum 2, fsync on every
node); etcd's is 1 or 3 members on 127.0.0.1 (each fsyncs its WAL before acking), driven
through its v3 JSON gateway by one asyncio process with raw HTTP/1.1 keep-alive requests (a
few tens of microseconds of client CPU a request, so the driver does not starve etcd of the
machine's cores). `--compare` interleaves the runs (store, etcd, store, etcd, ...) so both
see the same machine load, and prints each side's median writes/s and p99 and their ratio.

etcd comes from the distribution's packages: run as root, the script installs
`etcd-server` with apt-get if `etcd` is missing.
"""
import argparse, asyncio, base64, math, os, re, shutil, signal, socket, statistics, subprocess
import sys, tempfile, time

KEYS = 10_000
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_etcd():
    if shutil.which("etcd"):
        return
    if os.geteuid() != 0:
        sys.exit("etcd not found: apt-get install -y etcd-server (as root)")
    print("installing etcd-server with apt-get ...", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "etcd-server"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    # The package starts a system etcd where systemd runs; the bench starts its own.
    subprocess.run(["systemctl", "stop", "etcd"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def etcd_version():
    out = subprocess.run(["etcd", "--version"], capture_output=True, text=True).stdout
    return out.split()[2] if len(out.split()) > 2 else "?"


def start_etcd(members, workdir):
    peers = [(f"m{i}", free_port(), free_port()) for i in range(members)]
    initial = ",".join(f"{name}=http://127.0.0.1:{peer}" for name, _, peer in peers)
    procs = []
    for name, client, peer in peers:
        procs.append(subprocess.Popen([
            "etcd", "--name", name, "--data-dir", os.path.join(workdir, name),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", initial, "--initial-cluster-state", "new",
            "--log-level", "error",
        ], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs, [client for _, client, _ in peers]


def stop_etcd(procs):
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


class Conn:
    """One keep-alive HTTP/1.1 connection to etcd's JSON gateway."""

    def __init__(self, reader, writer, port):
        self.reader, self.writer, self.port = reader, writer, port

    @classmethod
    async def open(cls, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, port)

    async def put(self, key, b64value):
        body = b'{"key":"' + base64.b64encode(key) + b'","value":"' + b64value + b'"}'
        self.writer.write(b"POST /v3/kv/put HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Type: application/json\r\nContent-Length: "
                          + str(len(body)).encode() + b"\r\n\r\n" + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lower = head.lower()
        m = re.search(rb"content-length:\s*(\d+)", lower)
        if m:
            data = await self.reader.readexactly(int(m.group(1)))
        elif b"transfer-encoding: chunked" in lower:
            data = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                data += await self.reader.readexactly(size + 2)
                if size == 0:
                    break
        else:
            raise RuntimeError(f"no body length in {head[:200]!r}")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"put: {head.splitlines()[0]!r}: {data[:200]!r}")


async def drive(ports, concurrency, value_size, duration_s):
    b64value = base64.b64encode(b"x" * value_size)
    latencies, errors = [], 0
    stop_at = time.perf_counter() + duration_s

    async def worker(i):
        nonlocal errors
        port = ports[i % len(ports)]  # spread over the members, as a client library would
        conn = await Conn.open(port)
        k = i
        while time.perf_counter() < stop_at:
            key = b"bench:%d" % (k % KEYS)
            k += concurrency
            t = time.perf_counter()
            try:
                await conn.put(key, b64value)
                latencies.append(time.perf_counter() - t)
            except Exception:
                errors += 1
                conn.writer.close()
                conn = await Conn.open(port)

    start = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return latencies, errors, time.perf_counter() - start


def wait_ready(port, limit_s=30):
    deadline = time.time() + limit_s

    async def one():
        conn = await Conn.open(port)
        await conn.put(b"ready", base64.b64encode(b"1"))
        conn.writer.close()

    while time.time() < deadline:
        try:
            asyncio.run(one())
            return
        except Exception:
            time.sleep(0.2)
    sys.exit(f"etcd on port {port} did not become ready within {limit_s} s")


def rank(sorted_values, q):
    """The q-quantile: the smallest value at least q of the values are at or below."""
    return sorted_values[max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))]


def etcd_run(members, concurrency, value_size, duration_s):
    """A fresh etcd cluster under the load: (writes/s, p50 ms, p99 ms, errors)."""
    workdir = tempfile.mkdtemp(prefix="etcd-bench-")
    procs, ports = start_etcd(members, workdir)
    try:
        for port in ports:
            wait_ready(port)
        lat, errors, elapsed = asyncio.run(drive(ports, concurrency, value_size, duration_s))
        lat.sort()
        if not lat:
            sys.exit(f"etcd acked no write ({errors} errors)")
        return len(lat) / elapsed, rank(lat, 0.5) * 1000, rank(lat, 0.99) * 1000, errors
    finally:
        stop_etcd(procs)
        shutil.rmtree(workdir, ignore_errors=True)


def store_run(binary, concurrency, value_size, duration_s):
    """`replicheck store bench` under the same load: (writes/s, p50 ms, p99 ms, errors)."""
    out = subprocess.run([binary, "store", "bench", "--concurrency", str(concurrency),
                          "--value-size", str(value_size), "--duration", f"{duration_s:g}s"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"store bench failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    text = out.stdout
    writes_s = float(re.search(r"throughput:\s+(\d+) writes/s", text).group(1))
    p50, p99 = (float(x) for x in re.search(r"p50 ([\d.]+) ms, p99 ([\d.]+) ms", text).groups())
    errors = int(re.search(r"(\d+) errors", text).group(1)) if re.search(r"(\d+) errors", text) else 0
    return writes_s, p50, p99, errors


def compare(args):
    binary = args.replicheck or os.path.join(REPO, "target", "release", "replicheck")
    if not os.access(binary, os.X_OK):
        sys.exit(f"{binary}: not found; build it with `cargo build --release` or pass --replicheck")
    concurrencies = [int(c) for c in args.concurrencies.split(",")]
    print(f"store bench (3 nodes, W=2) beside etcd {etcd_version()} ({args.members} members), "
          f"{args.value_size}-byte values, {args.duration:g} s a run, {args.runs} interleaved runs each, "
          f"{os.cpu_count()} cores")
    print(f"{'clients':>7}  {'store w/s':>9} {'p50':>7} {'p99':>7}  {'etcd w/s':>9} {'p50':>7} {'p99':>7}  {'ratio':>5}")
    for c in concurrencies:
        store, etcd = [], []
        for _ in range(args.runs):
            store.append(store_run(binary, c, args.value_size, args.duration))
            etcd.append(etcd_run(args.members, c, args.value_size, args.duration))
        med = lambda runs, i: statistics.median(r[i] for r in runs)
        s, e = [med(store, i) for i in range(3)], [med(etcd, i) for i in range(3)]
        errs = sum(r[3] for r in store) + sum(r[3] for r in etcd)
        print(f"{c:>7}  {s[0]:>9.0f} {s[1]:>6.2f}ms {s[2]:>6.2f}ms  {e[0]:>9.0f} {e[1]:>6.2f}ms {e[2]:>6.2f}ms  "
              f"{s[0] / e[0]:>4.2f}x" + (f"  ({errs} errors)" if errs else ""), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", action="store_true", help="store bench and etcd side by side")
    ap.add_argument("--members", type=int, default=3, choices=[1, 3])
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=16, help="etcd alone: connections")
    ap.add_argument("--concurrencies", default="1,16,64", help="--compare: connection counts")
    ap.add_argument("--runs", type=int, default=3, help="--compare: runs of each side per count")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds a run")
    ap.add_argument("--replicheck", help="--compare: the binary (default: target/release/replicheck)")
    args = ap.parse_args()
    ensure_etcd()
    if args.compare:
        compare(args)
        return
    writes_s, p50, p99, errors = etcd_run(args.members, args.concurrency, args.value_size, args.duration)
    print(f"etcd bench: {args.members} member(s), etcd {etcd_version()}, {args.value_size}-byte values, "
          f"{args.concurrency} connections, {args.duration:g}s")
    print(f"  throughput:  {writes_s:.0f} writes/s ({errors} errors)")
    print(f"  latency:     p50 {p50:.2f} ms, p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
