#!/usr/bin/env python3
"""Drive etcd (v3 JSON gateway, /v3/kv/put) with the load of `replicheck store bench`:
`--concurrency` connections writing `--value-size`-byte values to 10,000 keys for
`--duration` seconds. Starts its own etcd: 1 member, or 3 members on 127.0.0.1 (each
fsyncs its WAL before acking, like the store's nodes). Prints writes/s and p50/p99 latency.

    python3 scripts/etcd_bench.py --members 3 --value-size 100 --concurrency 16 --duration 10
"""
import argparse, base64, http.client, json, os, shutil, signal, socket, subprocess
import sys, tempfile, threading, time

KEYS = 10_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def put(conn, key, value):
    body = json.dumps({"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()})
    conn.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"put: HTTP {resp.status}: {data[:200]!r}")


def wait_ready(port, limit_s=30):
    deadline = time.time() + limit_s
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            put(conn, b"ready", b"1")
            return
        except Exception:
            time.sleep(0.2)
    sys.exit(f"etcd on port {port} did not become ready within {limit_s} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=3, choices=[1, 3])
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--duration", type=float, default=10.0)
    args = ap.parse_args()
    if shutil.which("etcd") is None:
        sys.exit("etcd not found: apt-get install -y etcd-server etcd-client")
    workdir = tempfile.mkdtemp(prefix="etcd-bench-")
    procs, ports = start_etcd(args.members, workdir)
    try:
        for port in ports:
            wait_ready(port)
        stop = threading.Event()
        results = []
        value = b"x" * args.value_size

        def worker(i):
            # Spread connections over the members, as a client library would.
            conn = http.client.HTTPConnection("127.0.0.1", ports[i % len(ports)], timeout=10)
            latencies, errors, k = [], 0, i
            while not stop.is_set():
                key = f"bench:{k % KEYS}".encode()
                k += args.concurrency
                t = time.perf_counter()
                try:
                    put(conn, key, value)
                    latencies.append(time.perf_counter() - t)
                except Exception:
                    errors += 1
                    conn = http.client.HTTPConnection("127.0.0.1", ports[i % len(ports)], timeout=10)
            results.append((latencies, errors))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.concurrency)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(args.duration)
        stop.set()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        lat = sorted(x for l, _ in results for x in l)
        errors = sum(e for _, e in results)
        rank = lambda q: lat[max(1, min(len(lat), int(-(-q * len(lat) // 1)))) - 1]
        print(f"etcd bench: {args.members} member(s), etcd {subprocess.run(['etcd', '--version'], capture_output=True, text=True).stdout.split()[2]}, "
              f"{args.value_size}-byte values, {args.concurrency} connections, {args.duration:g}s")
        print(f"  writes:      {len(lat)} acked, {errors} errors in {elapsed:.1f} s")
        print(f"  throughput:  {len(lat) / elapsed:.0f} writes/s")
        print(f"  latency:     p50 {rank(0.5) * 1000:.2f} ms, p99 {rank(0.99) * 1000:.2f} ms, max {lat[-1] * 1000:.2f} ms")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
