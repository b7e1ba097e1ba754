#!/usr/bin/env python3
"""A tenant of the latency benchmark (tests/gpu/latency_bench.py); one process each.

  --role infer  an inference server: --model resnet50 (torchvision, random weights,
                bf16, channels-last; the transformer where torchvision is missing) on a
                batch of --batch images, or --model transformer (a 6-layer torch.nn
                encoder, width 512, on --batch sequences of 128 tokens), replayed as
                one CUDA graph (eager where capture fails or LATENCY_GRAPHS=0). It
                serves --requests requests, each followed by the idle gap
                latency_stats.request_gaps() gives for --seed (exponential, mean
                --gap-ms): the same schedule in every configuration. A request's
                latency: submission to completion (the graph replayed, the stream
                synchronised). --open-loop: the gaps separate arrivals instead
                (Poisson arrivals that do not wait for completions); a request that
                arrives while the one before runs waits, and its latency runs from its
                arrival, so queueing counts.
  --role train  a training loop that keeps the GPU busy: --model resnet50 SGD steps on
                --batch random images, or --model transformer AdamW steps of the
                encoder on --batch sequences of 256 tokens (bf16 autocast both), one
                step always queued behind the one running (each step's end stamped
                when the next is queued).

Hand-shake with the benchmark through files in --dir (no signals: the tenant may run
under `kairos run`): the tenant warms up, writes NAME.ready ("key=value ..."), waits for
DIR/go (a CLOCK_REALTIME start time), then works; infer begins --lead-s after the start
and stops after its requests or --max-s, then writes NAME.done; train begins at the start
(or once --after FILE exists) and stops when DIR/stop exists or after --max-s.
Stamps in NAME.stamps: "START_NS LATENCY_NS" per request, "END_NS" per training step.
--rounds: the process serves round after round (tests/gpu/harm_bench.py keeps it alive
across its configurations' rounds): round K waits for DIR/go.K, whose words after the
start time may set lead_s= and max_s= for that round, stops training at DIR/stop.K and
writes NAME.K.stamps and NAME.K.done; the process ends once DIR/quit exists.
--eager: no CUDA graph (launch-bound requests on purpose); --gap-ms 0 with many
--requests and a --max-s is a closed loop (each request sent as the previous completes).
--dry-run: no torch and no GPU; a request sleeps --dry-service-ms and a step 5 ms, so
tests/system/test_latency_bench.py runs the benchmark's whole logic on a CPU
(--dry-fail: the inference tenant exits 1 half way, a failure the benchmark must report;
--dry-hang: it stops answering half way, a hang the benchmark must report).
"""
import argparse
import ctypes
import itertools
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import latency_stats  # noqa: E402


def shim_loaded():
    """Whether libkairos.so is mapped into this process (it runs under the shim)."""
    try:
        with open("/proc/self/maps") as f:
            return "libkairos" in f.read()
    except OSError:
        return False


def wait_for_go(path, quit_path, deadline):
    """(start time, {key: value} of the words after it) from the go file once it exists;
    None once quit_path (None: never) exists first."""
    while not os.path.exists(path):
        if quit_path and os.path.exists(quit_path):
            return None
        if time.time() > deadline:
            sys.exit(f"{path} never appeared")
        time.sleep(0.005)  # the start time is in the file, 0.2 s or more ahead
    with open(path) as f:
        words = f.read().split()
    return float(words[0]), dict(w.split("=", 1) for w in words[1:] if "=" in w)


def round_paths(args, k):
    """The hand-shake files of round k (None: the one-shot run's, without a suffix)."""
    sfx = "" if k is None else f".{k}"
    return {"go": os.path.join(args.dir, "go" + sfx), "stop": os.path.join(args.dir, "stop" + sfx),
            "stamps": os.path.join(args.dir, f"{args.name}{sfx}.stamps"),
            "done": os.path.join(args.dir, f"{args.name}{sfx}.done")}


def want_graphs(args):
    """Requests as one CUDA graph each, unless --eager or LATENCY_GRAPHS=0."""
    return not args.eager and os.environ.get("LATENCY_GRAPHS", "1") != "0"


class DryWork:
    """Stand-ins with no GPU: sleeps of a fixed length. They ask getenv for the MPS pipe
    folder as libcuda does when it starts, so that a preloaded shim routes them, and
    where it names one, add their pid to its clients file, as the stand-in control
    daemon (tests/stand-ins) reads a server's clients from there (LATENCY_DRY_NO_MPS=1:
    they do not, as a libcuda that took no route)."""

    def __init__(self, args):
        self.service = args.dry_service_ms / 1000
        self.info = {"model": "dry", "graphs": int(want_graphs(args))}
        getenv = ctypes.CDLL(None).getenv
        getenv.restype = ctypes.c_char_p
        pipe = getenv(b"CUDA_MPS_PIPE_DIRECTORY")
        if pipe and os.path.isdir(pipe) and os.environ.get("LATENCY_DRY_NO_MPS") != "1":
            fd = os.open(os.path.join(pipe.decode(), "clients"),
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, f"{os.getpid()}\n".encode())
            os.close(fd)

    def request(self):
        time.sleep(self.service)

    def step(self):
        time.sleep(0.005)

    def drain(self):
        pass


def transformer_encoder(torch):
    """The transformer both roles use: 6 layers, width 512, 8 heads."""
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)


class TorchInfer:
    """One inference request: a batch through the model, synchronised."""

    def __init__(self, args):
        import torch
        self.torch = torch
        torch.manual_seed(args.seed)
        dev = torch.device("cuda")
        try:
            if args.model != "resnet50":
                raise ImportError("transformer asked for")
            import torchvision
            net = torchvision.models.resnet50(weights=None)
            x = torch.randn(args.batch, 3, 224, 224)
            model = "resnet50"
        except ImportError:
            net = transformer_encoder(torch)
            x = torch.randn(args.batch, 128, 512)
            model = "transformer-encoder"
        net = net.to(dev, dtype=torch.bfloat16).eval()
        x = x.to(dev, dtype=torch.bfloat16)
        if model == "resnet50":
            net = net.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        self.net, self.x, self.graph = net, x, None
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(5):  # kernels chosen, memory pooled
                    net(x)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            if want_graphs(args):
                try:
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g, stream=side):  # the warmed-up stream
                        net(x)
                    g.replay()
                    torch.cuda.synchronize()
                    self.graph = g
                except Exception as e:  # eager below; said in NAME.ready
                    print(f"CUDA graph capture failed, eager: {e}", flush=True)
                    torch.cuda.synchronize()
        for _ in range(20):
            self.request()
        self.info = {"model": model, "graphs": int(self.graph is not None),
                     "torch": torch.__version__}

    def request(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            with self.torch.no_grad():
                self.net(self.x)
        self.torch.cuda.synchronize()

    def step(self):
        raise NotImplementedError

    def drain(self):
        pass


class TorchTrain:
    """One training step, queued behind the previous one (the GPU never waits for
    Python between steps)."""

    def __init__(self, args):
        import torch
        self.torch = torch
        torch.manual_seed(args.seed)
        dev = torch.device("cuda")
        if args.model == "transformer":
            net, x, y, opt = self.transformer(torch, dev, args.batch)
        else:
            net, x, y, opt = self.resnet(torch, dev, args.batch)
        loss_fn = torch.nn.CrossEntropyLoss()

        def launch():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            ev = torch.cuda.Event()
            ev.record()
            return ev
        self.launch = launch
        for _ in range(3):
            launch()
        torch.cuda.synchronize()
        self.pending = None
        self.info = {"model": f"{args.model}-train", "graphs": 0, "torch": torch.__version__}

    @staticmethod
    def resnet(torch, dev, batch):
        import torchvision
        net = torchvision.models.resnet50(weights=None).to(dev).to(
            memory_format=torch.channels_last)
        x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (batch,), device=dev)
        return net, x, y, torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    @staticmethod
    def transformer(torch, dev, batch):
        """The encoder with a 1000-way head on its mean token: a classifier's step."""
        class Classifier(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.head = transformer_encoder(torch), torch.nn.Linear(512, 1000)

            def forward(self, x):
                return self.head(self.body(x).mean(dim=1))
        net = Classifier().to(dev)
        x = torch.randn(batch, 256, 512, device=dev)
        y = torch.randint(0, 1000, (batch,), device=dev)
        return net, x, y, torch.optim.AdamW(net.parameters(), lr=1e-4)

    def step(self):
        """Queues a step, then waits for the one before it: returns when a step ended."""
        ev = self.launch()
        if self.pending is None:
            self.pending = ev
            ev = self.launch()
        self.pending.synchronize()
        self.pending = ev

    def drain(self):
        """Waits for the steps queued; the next round queues two afresh (--rounds)."""
        self.torch.cuda.synchronize()
        self.pending = None


def misbehave(args):
    """Dry run, half way: --dry-fail exits 1, --dry-hang stops answering."""
    if args.dry_hang:
        print("--dry-hang: hanging on purpose", flush=True)
        while True:
            time.sleep(60)
    if args.dry_fail:
        sys.exit("--dry-fail: failing on purpose")


def serve(args, work, out, max_s):
    """Requests until --requests or max_s: closed loop (each gap after a completion) or,
    with --open-loop, at arrival times the gaps separate (late ones wait, and count it)."""
    gaps = latency_stats.request_gaps(args.requests, args.gap_ms, args.seed)
    deadline = time.time() + max_s
    half_way = (args.requests // 2, time.time() + max_s / 2)  # whichever comes first
    arrival = time.perf_counter_ns()  # open loop: when the next request arrives
    wall_offset = time.time_ns() - arrival
    for i, gap in enumerate(gaps):
        if time.time() > deadline:
            print(f"stopped at --max-s after {i} requests", flush=True)
            break
        if args.dry_run and (i == half_way[0] or time.time() > half_way[1]):
            misbehave(args)
        if args.open_loop:
            time.sleep(max(0, arrival - time.perf_counter_ns()) / 1e9)
            t0, t_wall = arrival, arrival + wall_offset
        else:
            t_wall, t0 = time.time_ns(), time.perf_counter_ns()
        work.request()
        out.append((t_wall, time.perf_counter_ns() - t0))
        if args.open_loop:
            arrival += int(gap * 1e6)
        else:
            time.sleep(gap / 1000)


def train(work, out, stop, max_s):
    deadline = time.time() + max_s
    while not os.path.exists(stop) and time.time() < deadline:
        work.step()
        out.append((time.time_ns(),))
    work.drain()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=["infer", "train"], required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--gap-ms", type=float, default=6.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lead-s", type=float, default=0.0)
    ap.add_argument("--max-s", type=float, default=60.0)
    ap.add_argument("--after", help="train: start once this file exists")
    ap.add_argument("--ready-timeout-s", type=float, default=300.0)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--dry-service-ms", type=float, default=0.5)
    ap.add_argument("--dry-fail", action="store_true", help="dry run: exit 1 half way")
    ap.add_argument("--dry-hang", action="store_true", help="dry run: stop answering half way")
    ap.add_argument("--rounds", action="store_true", help="round after round until DIR/quit")
    ap.add_argument("--eager", action="store_true", help="infer: no CUDA graph")
    ap.add_argument("--model", choices=["resnet50", "transformer"], default="resnet50")
    ap.add_argument("--open-loop", action="store_true",
                    help="infer: --gap-ms separates arrivals, not a completion and a request")
    args = ap.parse_args()
    if args.dry_run:
        work = DryWork(args)
    elif args.role == "infer":
        work = TorchInfer(args)
    else:
        work = TorchTrain(args)
    info = dict(work.info, pid=os.getpid(), shim=int(shim_loaded()),
                mps=int(bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY"))))
    if args.role == "infer":
        info["open_loop"] = int(args.open_loop)
    ready = os.path.join(args.dir, f"{args.name}.ready")
    with open(ready + ".new", "w") as f:
        f.write(" ".join(f"{k}={v}" for k, v in info.items()) + "\n")
    os.rename(ready + ".new", ready)
    quit_path = os.path.join(args.dir, "quit") if args.rounds else None
    for k in itertools.count(1) if args.rounds else [None]:
        paths = round_paths(args, k)
        go = wait_for_go(paths["go"], quit_path, time.time() + args.ready_timeout_s)
        if go is None:
            break
        run_round(args, work, paths, *go)


def cpu_use(before):
    """What the process spent on the CPU since before (a getrusage): user and system
    seconds, voluntary and involuntary context switches, and its threads now; a
    benchmark's figures of where a difference between configurations comes from."""
    now = resource.getrusage(resource.RUSAGE_SELF)
    threads = sum(1 for _ in os.scandir("/proc/self/task")) if os.path.isdir(
        "/proc/self/task") else 0
    return (f"utime_s={now.ru_utime - before.ru_utime:.3f} "
            f"stime_s={now.ru_stime - before.ru_stime:.3f} "
            f"nvcsw={now.ru_nvcsw - before.ru_nvcsw} nivcsw={now.ru_nivcsw - before.ru_nivcsw} "
            f"threads={threads}")


def run_round(args, work, paths, start, opts):
    """One run of the work from the start time in the go file (lead_s= and max_s= in it
    override --lead-s and --max-s), then its stamps and the done file."""
    max_s = float(opts.get("max_s", args.max_s))
    out = []
    before = resource.getrusage(resource.RUSAGE_SELF)
    if args.role == "infer":
        time.sleep(max(0.0, start + float(opts.get("lead_s", args.lead_s)) - time.time()))
        serve(args, work, out, max_s)
    else:
        time.sleep(max(0.0, start - time.time()))
        while args.after and not os.path.exists(args.after) and not os.path.exists(paths["stop"]):
            time.sleep(0.001)
        train(work, out, paths["stop"], max_s)
    with open(paths["stamps"], "w") as f:
        f.writelines(" ".join(str(v) for v in t) + "\n" for t in out)
    with open(paths["done"], "w") as f:
        f.write(f"units={len(out)} {cpu_use(before)}\n")
    print(f"role={args.role} units={len(out)}", flush=True)


if __name__ == "__main__":
    main()
