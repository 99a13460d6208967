#!/usr/bin/env python3
"""torch.cat per column: the baseline of the target "kernel alone: >= 50x as fast as
torch.cat per column" (200x10x1000 int64).

For a shape P x C x R (int64 columns, R rows per partition), P*C device
tensors are made once (inputs already on the device, as funnel's kernel
finds them after its copies); then each timed iteration concatenates every
column with one torch.cat, C calls, between two CUDA events on the current
stream. The median over the iterations is reported. With --c-results (the
CSV of bench/funnel_bench.c from the same host) it prints funnel's kernel
time for the same shape and the ratio, which is the target's figure.

    python3 bench/torch_cat.py --shape 200x10x1000 --c-results bench.csv
"""
import argparse
import csv
import json
import statistics
import sys


def parse_shape(text):
    parts = text.lower().split("x")
    if len(parts) != 3:
        raise SystemExit(f"torch_cat: bad shape {text!r}: expected PxCxR, e.g. 200x10x1000")

    def count(s):
        mult = {"k": 1000, "m": 1000000}.get(s[-1:], 1)
        return int(s[:-1] if mult > 1 else s) * mult

    return tuple(count(p) for p in parts)


def funnel_kernel_ms(path, shape):
    """funnel's kernel-alone median for the shape (int64 mix), from the C CSV."""
    p, c, r = shape
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if (row["strategy"] == "kernel" and row["mix"] == "int64" and
                    int(row["partitions"]) == p and int(row["columns"]) == c and
                    int(row["rows_per_partition"]) == r and row["ms_median"]):
                return float(row["ms_median"]), row["backend"]
    return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="200x10x1000")
    ap.add_argument("--reps", type=int, default=51)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--c-results", help="funnel_bench's CSV from this host")
    ap.add_argument("--json", help="append the result as one JSON line")
    args = ap.parse_args()
    shape = parse_shape(args.shape)
    p, c, r = shape

    import torch  # here, so --help works without torch

    if not torch.cuda.is_available():
        raise SystemExit("torch_cat: no CUDA device: this baseline runs on the GPU host only")
    dev = torch.device("cuda")
    cols = [[torch.randint(-2**62, 2**62, (r,), dtype=torch.int64, device=dev) for _ in range(p)]
            for _ in range(c)]
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(args.warmup + args.reps):
        start.record()
        outs = [torch.cat(col) for col in cols]
        end.record()
        end.synchronize()
        if i >= args.warmup:
            times.append(start.elapsed_time(end))
        del outs
    # the result is right, so the timing is of real work
    for k in (0, c - 1):
        got = torch.cat(cols[k])
        want = torch.stack([t for t in cols[k]]).reshape(-1)
        if not torch.equal(got, want):
            raise SystemExit("torch_cat: torch.cat gave a wrong result")
    ms = statistics.median(times)
    result = {"shape": f"{p}x{c}x{r}", "mix": "int64", "strategy": "torch_cat",
              "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "reps": args.reps, "ms_median": ms, "ms_min": min(times), "cat_calls": c}
    print(f"torch.cat per column, {p}x{c}x{r} int64 on {result['device']} (torch {torch.__version__}): "
          f"{ms:.4f} ms median, {min(times):.4f} ms min, {c} cat calls, {args.reps} reps")
    if args.c_results:
        fk, backend = funnel_kernel_ms(args.c_results, shape)
        if fk is None:
            print(f"  {args.c_results} has no kernel row for {p}x{c}x{r} int64")
        else:
            result.update({"funnel_kernel_ms": fk, "funnel_backend": backend, "speedup": ms / fk})
            verdict = "PASS" if ms / fk >= 50 else "FAIL"
            print(f"  funnel's kernel alone ({backend}): {fk:.4f} ms -> {ms / fk:.1f}x faster "
                  f"than torch.cat (kernel alone: >= 50x as fast as torch.cat per column: "
                  f"{verdict})")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
