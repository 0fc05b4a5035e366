#!/usr/bin/env python3
"""serve-np.py -- `loom serve` with several slot counts side by side, as many concurrent clients as
slots: per round and slot count, the aggregate generated tokens/s (all clients' tokens over the wall
time of the round), the mean tokens/s of one client, and the mean time to first token (the server's
prompt_ms; no request waits for a slot). The servers run at once and the rounds alternate
(np 1, 2, 4, np 1, 2, 4, ...), since the machine's speed drifts. A benchmark, not a test.
Needs only Python's standard library (the GPU machine has no node), so it runs wherever loom does.

usage: bench/serve-np.py LOOM_BIN MODEL [--np 1,2,4] [-n 128] [--rounds 3] [-t 2] [-- SERVER ARGS...]
e.g.   loom gen-model --preset 110m --type f16 --tokenizer /work/shared/models/tokenizer.bin -o /tmp/np-110m.gguf
       bench/serve-np.py build/loom /tmp/np-110m.gguf            (CPU: -np 1, 2, 4)
       bench/serve-np.py build/loom 7b-q4_k_m.gguf --np 1,8 -- -ngl 99   (one GPU: -np 1 against -np 8)
"""
import argparse, json, re, subprocess, sys, tempfile, threading, time, urllib.request

PROMPTS = ["Once upon a time", "The little dog ran", "Lily and Ben went to the park", "One day, a bird",
           "Tom had a red ball", "The sun was hot", "A girl named Sue", "Max the cat liked to"]


def start(loom, model, np_, threads, extra, logdir):
    log = open(f"{logdir}/serve-np{np_}.log", "w+")
    cmd = [loom, "serve", "-m", model, "--port", "0", "-t", str(threads), "-np", str(np_), "-c", str(np_ * 512)] + extra
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log), log


def wait_url(proc, log, seconds=300):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            log.seek(0)
            sys.exit(f"serve-np: the server exited ({proc.returncode}):\n{log.read()}")
        log.seek(0)
        m = re.search(r"http://127\.0\.0\.1:\d+", log.read())
        if m:
            try:
                with urllib.request.urlopen(m.group(0) + "/health", timeout=2) as r:
                    if b'"ok"' in r.read():
                        return m.group(0)
            except OSError:
                pass
        time.sleep(0.2)
    sys.exit("serve-np: no server after %d s" % seconds)


def complete(url, prompt, n, out, i):
    body = json.dumps({"prompt": prompt, "n_predict": n, "ignore_eos": True, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/completion", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out[i] = json.loads(r.read())


def one_round(url, np_, n):
    out = [None] * np_
    ts = [threading.Thread(target=complete, args=(url, PROMPTS[c % len(PROMPTS)], n, out, c)) for c in range(np_)]
    t0 = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.time() - t0
    if any(o is None for o in out):
        sys.exit("serve-np: a request failed")
    tok = sum(o["tokens_predicted"] for o in out)
    per = sum(o["timings"]["predicted_per_second"] for o in out) / np_
    pms = sum(o["timings"]["prompt_ms"] for o in out) / np_
    return tok / dt, per, pms


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description="loom serve: aggregate tokens/s against slot count")
    ap.add_argument("loom")
    ap.add_argument("model")
    ap.add_argument("--np", default="1,2,4", help="slot counts, comma-separated")
    ap.add_argument("-n", type=int, default=128, help="tokens each client asks for")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-t", type=int, default=2, help="CPU threads of each server")
    a = ap.parse_args(argv)
    nps = [int(x) for x in a.np.split(",")]
    with tempfile.TemporaryDirectory() as logdir:
        servers = {np_: start(a.loom, a.model, np_, a.t, extra, logdir) for np_ in nps}
        try:
            urls = {np_: wait_url(*servers[np_]) for np_ in nps}
            for np_ in nps:
                one_round(urls[np_], np_, a.n)  # warm-up
            print(f"{'round':<6} {'-np':<6} {'aggregate t/s':>14} {'per client t/s':>15} {'prompt ms':>10}")
            agg = {np_: [] for np_ in nps}
            for r in range(1, a.rounds + 1):
                for np_ in nps:
                    g, per, pms = one_round(urls[np_], np_, a.n)
                    agg[np_].append(g)
                    print(f"{r:<6} {np_:<6} {g:>14.1f} {per:>15.1f} {pms:>10.1f}", flush=True)
            base = sum(agg[nps[0]]) / len(agg[nps[0]])
            for np_ in nps[1:]:
                print(f"-np {np_} / -np {nps[0]}: {sum(agg[np_]) / len(agg[np_]) / base:.2f}x aggregate (mean of {a.rounds} rounds)")
        finally:
            for p, log in servers.values():
                p.terminate()
            for p, log in servers.values():
                p.wait(timeout=30)
                log.close()


if __name__ == "__main__":
    main()
