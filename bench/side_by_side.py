"""odradek side by side with Apache Kafka 3.9 (ZooKeeper mode) and 4.x (KRaft) and Tansu 0.6, in one
run on one machine, printed as one markdown table with odradek's ratio to Kafka 3.9 (issue 36's aims;
`--reference kafka-4` for Kafka 4's) (issues 34 and 36).

The run, in this order, every broker on the same machine as its clients:
1. each single broker (bench/peers.py: odradek, kafka-3.9, kafka-4, tansu), started once with
   message.max.bytes 2 MiB (odradek and Kafka) and kept for:
   - RSS at rest: VmRSS from /proc/<pid>/status 2 s after the broker answers, before any topic;
   - throughput (bench/throughput.py, the small workload): 100 B and 1 KiB records to a fresh
     one-partition topic, produce MB/s and consume MB/s, the median of RUNS runs after a warm-up;
   - latency (bench/latency.py --keyed): 100 partitions, 1 KiB records keyed over 1,000,000 keys, acks=all,
     linger.ms 1, at 5, 10 and 20 MB/s and saturated (the producer as fast as it goes: the rate achieved is
     the broker's saturation throughput in this shape, the latency mostly the producer's queue) after one
     unmeasured 60 s run at 20 MB/s (the JVM's JIT compilers took
     half of Kafka's CPU in its first minute here, and 35-40% still after a 10 s one); the rate achieved, p50
     / p99 / p99.9 from send to receipt, the broker's CPU in cores (utime+stime from /proc/<pid>/stat over the
     window) and per request (divided by the requests the producer and consumer sent in it by librdkafka's
     statistics: the same client-side count for every broker; odradek's own /metrics count is in the progress
     lines). Requests are not alike from broker to broker: a broker that answers slowly gets fewer, larger
     ones, so CPU per request is read beside the cores;
   - RSS under load: the highest VmRSS sampled every 0.2 s during the throughput and latency runs;
2. replication (bench/replication.py) on three brokers of odradek, Kafka 3.9 (on a ZooKeeper) and
   Kafka 4 (KRaft, combined nodes): RF=1 and RF=3 acks=all throughput, CPU seconds per GB on the
   RF=3 partition's leader and on a follower, and failover time after kill -9 of the leader (every
   cluster notices the death after the same 6 s timeout). Tansu has no replication;
3. start-up (bench/startup.py): from spawning the broker to a Metadata answer listing it, the median
   of several starts (Kafka 4's storage format and 3.9's ZooKeeper prepared untimed).

Kafka's JVMs run with the options of Kafka's own start script (1 GiB heap, G1, the full JIT:
testing/kafka_reference.SERVER_JVM_OPTIONS). ZooKeeper's CPU and memory are not counted for Kafka 3.9
nor for odradek's cluster. Progress lines go to stderr, the table to stdout.

Sizes: the full run (100k records per size and 3 runs per throughput figure, 10 s per latency rate
after a 60 s warm-up, 50k records per replication throughput run, 3 starts each) took 11 minutes
on a quiet 2-core machine; `--quick` (10k records and 1 run, only 5 MB/s for 2 s
and no warm-up, 3k records per replication run, 1 start) checks the whole path, and its figures mean
little. Most of a quick run is starting JVMs (seven Kafka brokers and three ZooKeepers): about 5 min
on this machine under a load of 10-20, less on a quiet one. A broker that cannot
run here (no Java, no jars, no Tansu binary) is named in one line and its cells say "not run"; a
measurement that fails says "failed" and the error follows the table; the run goes on either way.

Run `python bench/side_by_side.py [--quick] [--brokers odradek,kafka-3.9,kafka-4,tansu]
[--sections single,replication,startup]` from the repository root. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import latency
import replication
import startup
import throughput
from peers import NAMES, label, missing, single_broker

REST_S = 2.0  # how long a broker idles before its RSS at rest is read
RSS_SAMPLE_S = 0.2
PARTITIONS = 100
KEY_SPACE = 1_000_000
SESSION_TIMEOUT_MS = 6000
REFERENCE = "kafka-3.9"  # the ratio column's denominator unless --reference names another


@dataclass(frozen=True, slots=True)
class Plan:
    """How much of each measurement a run makes."""

    records: int  # per record size, in the throughput runs
    runs: int  # throughput runs per figure (the median is taken)
    rates: tuple[float, ...]  # latency rates, MB/s
    latency_seconds: float
    latency_warmup_seconds: float  # an unmeasured run at the highest rate first (for the JIT); 0: none
    replication_records: int
    startup_runs: int


FULL = Plan(
    records=100_000,
    runs=3,
    rates=(5.0, 10.0, 20.0, 0.0),  # 0: saturated, the producer as fast as it goes
    latency_seconds=10.0,
    latency_warmup_seconds=60.0,
    replication_records=50_000,
    startup_runs=3,
)
QUICK = Plan(
    records=10_000,
    runs=1,
    rates=(5.0,),
    latency_seconds=2.0,
    latency_warmup_seconds=0.0,
    replication_records=3_000,
    startup_runs=1,
)


@dataclass(frozen=True, slots=True)
class Figure:
    text: str
    higher_is_better: bool
    digits: int = 1


Cell = float | str  # a figure, or why there is none ("not run", "failed", "n/a")


class Table:
    """Figures in the order they were first named, each with a cell per broker."""

    def __init__(self, brokers: list[str], reference: str = REFERENCE) -> None:
        self.brokers = brokers
        self.reference = reference  # the ratio column's denominator
        self.figures: dict[str, Figure] = {}
        self.cells: dict[str, dict[str, Cell]] = {}
        self.notes: list[str] = []

    def figure(self, figure: Figure) -> str:
        self.figures.setdefault(figure.text, figure)
        self.cells.setdefault(figure.text, {})
        return figure.text

    def put(self, figure: Figure, broker: str, value: Cell) -> None:
        self.cells[self.figure(figure)][broker] = value

    def markdown(self) -> str:
        head = [label(name) for name in self.brokers]
        lines = [
            f"| figure | {' | '.join(head)} | odradek / {label(self.reference)} |",
            "|---|" + "---:|" * len(head) + "---|",
        ]
        for text, figure in self.figures.items():
            cells = self.cells[text]
            shown = [show(cells.get(name, "not run"), figure.digits) for name in self.brokers]
            lines.append(f"| {text} | {' | '.join(shown)} | {ratio(figure, cells, self.reference)} |")
        return "\n".join(lines)


def show(value: Cell, digits: int) -> str:
    if isinstance(value, str):
        return value
    if value != value:  # NaN: measured, but nothing came of it
        return "none"
    return f"{value:,.{digits}f}"


def ratio(figure: Figure, cells: dict[str, Cell], reference: str) -> str:
    """odradek's figure over the reference's, and by how much odradek is behind or ahead."""
    ours, theirs = cells.get("odradek"), cells.get(reference)
    if not isinstance(ours, float) or not isinstance(theirs, float) or ours != ours or theirs != theirs:
        return "n/a"
    if theirs == 0 or ours == 0:
        return "n/a (a zero)"
    times = ours / theirs
    shown = f"{times:.2f}x" if times >= 0.1 else f"{times:.2g}x"  # 0.0031x, not 0.00x
    if abs(times - 1) < 0.005:
        return f"{shown}: even"
    better = times > 1 if figure.higher_is_better else times < 1
    # the gap as a share of Kafka's figure: a rate that much lower or higher, a time or cost that
    # much longer or shorter
    return f"{shown}: {'ahead' if better else 'behind'} by {abs(times - 1):.0%}"


# -- measurements ----------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    """VmRSS of `pid` in MiB (/proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class PeakRss(threading.Thread):
    """The highest VmRSS of `pid` seen every RSS_SAMPLE_S until `stop()`."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(RSS_SAMPLE_S):
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
            except (OSError, RuntimeError):  # the broker is gone
                return

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak


RSS_REST = Figure("broker RSS at rest, MiB", False, 0)
RSS_LOAD = Figure("broker RSS under load (peak), MiB", False, 0)
STARTUP = Figure("start-up, spawn to a Metadata answer, s", False, 2)
RF1 = Figure("3 brokers: RF=1 acks=all produce, MB/s", True)
RF3 = Figure("3 brokers: RF=3 acks=all produce, MB/s", True)
LEADER_CPU = Figure("3 brokers: RF=3 leader CPU per GB, s", False)
FOLLOWER_CPU = Figure("3 brokers: RF=3 follower CPU per GB, s", False)
FAILOVER = Figure("3 brokers: failover after kill -9 of the leader, s", False, 2)


def throughput_figures(record_label: str) -> tuple[Figure, Figure]:
    return (
        Figure(f"produce {record_label} records, MB/s", True),
        Figure(f"consume {record_label} records, MB/s", True),
    )


def rate_name(rate: float) -> str:
    """A latency run's rate as the table names it (0: saturated, the producer as fast as it goes)."""
    return f"{rate:g} MB/s" if rate else "saturated"


def latency_figures(rate: float) -> dict[str, Figure]:
    at = f"keyed, {rate_name(rate)}:"
    return {
        "achieved": Figure(f"{at} rate achieved, MB/s", True),
        "p50": Figure(f"{at} p50 latency, ms", False),
        "p99": Figure(f"{at} p99 latency, ms", False),
        "p99.9": Figure(f"{at} p99.9 latency, ms", False),
        "cpu": Figure(f"{at} broker CPU per request, us", False, 0),
        "cores": Figure(f"{at} broker CPU, cores", False, 2),
    }


STARTED = time.monotonic()


def progress(line: str) -> None:
    """A line to stderr, stamped with the minutes and seconds since the run began."""
    minutes, seconds = divmod(int(time.monotonic() - STARTED), 60)
    print(f"[{minutes:02d}:{seconds:02d}] {line}", file=sys.stderr, flush=True)


def attempt(table: Table, broker: str, figures: list[Figure], what: str, measure: Callable[[], None]) -> None:
    """Run `measure`; when it raises, its figures say "failed" for `broker` and a note says why."""
    try:
        measure()
    except Exception as exc:  # one failed measurement is a result; the run goes on
        for figure in figures:
            table.put(figure, broker, "failed")
        reason = (str(exc) or type(exc).__name__).splitlines()[0][:200]
        table.notes.append(f"{label(broker)}, {what}: failed: {type(exc).__name__}: {reason}")
        progress(f"{broker}: {what} failed: {reason}")


def single_broker_run(table: Table, name: str, plan: Plan) -> None:
    """RSS at rest, throughput, keyed latency and RSS under load on one broker `name`."""
    overrides: dict[str, object] = dict(throughput.BROKER_SETTINGS)
    metrics: list[str] = []
    if name == "odradek":
        overrides |= latency.metrics_listener()
        metrics = [f"{overrides['http.listeners']}/metrics"]
    with single_broker(name, overrides) as broker:
        pid = broker.pid or 0
        time.sleep(REST_S)
        table.put(RSS_REST, name, rss_mib(pid))
        progress(f"{name}: RSS at rest {rss_mib(pid):,.0f} MiB")
        sampler = PeakRss(pid)
        sampler.start()
        for workload in throughput.small_workloads(plan.records):
            produce, consume = throughput_figures(workload.label)
            table.figure(produce)
            table.figure(consume)

            def measure_throughput(workload: throughput.Workload = workload) -> None:
                result = throughput.measure_workload(name, broker.bootstrap, workload, plan.runs)
                produce, consume = throughput_figures(workload.label)
                table.put(produce, name, result.produce_mb_s)
                table.put(consume, name, result.consume_mb_s)
                progress(result.row())

            attempt(table, name, [produce, consume], f"throughput {workload.label}", measure_throughput)
        options = argparse.Namespace(
            partitions=PARTITIONS,
            seconds=plan.latency_seconds,
            acks_only=False,
            keyed=True,
            key_space=KEY_SPACE,
        )
        warm_up = argparse.Namespace(**{**vars(options), "seconds": plan.latency_warmup_seconds})
        try:
            if plan.latency_warmup_seconds > 0:
                topic = f"latency-warm-up-{time.time_ns()}"
                latency.create_topic(broker.bootstrap, topic, PARTITIONS, 1)
                latency.measure((broker.bootstrap, [pid], metrics), topic, max(plan.rates), warm_up)
        except Exception as exc:  # the measured runs will say what is wrong
            progress(f"{name}: the latency warm-up failed: {exc}")
        for index, rate in enumerate(plan.rates):
            figures = latency_figures(rate)
            for figure in figures.values():
                table.figure(figure)

            def measure_latency(rate: float = rate, index: int = index) -> None:
                topic = f"latency-{index}-{time.time_ns()}"
                latency.create_topic(broker.bootstrap, topic, PARTITIONS, 1)
                result = latency.measure((broker.bootstrap, [pid], metrics), topic, rate, options)
                if isinstance(result, str):
                    raise RuntimeError(result)
                progress(f"{name} {result.line()}")
                at = latency_figures(rate)
                table.put(at["achieved"], name, result.achieved_mb_s)
                table.put(at["p50"], name, statistics.median(result.latencies_ms))
                table.put(at["p99"], name, result.percentile(0.99))
                table.put(at["p99.9"], name, result.percentile(0.999))
                table.put(at["cpu"], name, result.cpu_per_request_us)
                table.put(at["cores"], name, result.cores)
                if result.compiler_share >= 0.1:
                    table.notes.append(
                        f"{label(name)} at {rate_name(rate)}: {result.compiler_share:.0%} of its CPU in the "
                        "window was its JIT compiler threads' (still warming up)"
                    )
                if len(result.latencies_ms) < result.sent:
                    table.notes.append(
                        f"{label(name)} at {rate_name(rate)}: {len(result.latencies_ms):,} of "
                        f"{result.sent:,} records received by the consumer's end; the percentiles are "
                        "of those"
                    )

            attempt(table, name, list(figures.values()), f"latency at {rate_name(rate)}", measure_latency)
        table.put(RSS_LOAD, name, sampler.stop())
        progress(f"{name}: RSS under load (peak) {sampler.peak:,.0f} MiB")


def replication_run(table: Table, name: str, plan: Plan) -> None:
    figures = [RF1, RF3, LEADER_CPU, FOLLOWER_CPU, FAILOVER]
    for figure in figures:
        table.figure(figure)
    if name == "tansu":
        for figure in figures:
            table.put(figure, name, "n/a")
        return

    def measure() -> None:
        result = replication.run(name, plan.replication_records, SESSION_TIMEOUT_MS, report=progress)
        table.put(RF1, name, result.rf1_mb_s)
        table.put(RF3, name, result.rf3_mb_s)
        table.put(LEADER_CPU, name, result.leader_cpu_s_per_gb)
        table.put(FOLLOWER_CPU, name, result.follower_cpu_s_per_gb)
        table.put(FAILOVER, name, result.failover_s)

    attempt(table, name, figures, "replication", measure)


def startup_run(table: Table, name: str, plan: Plan) -> None:
    table.figure(STARTUP)

    def measure() -> None:
        seconds = startup.peer_starts(name, plan.startup_runs)
        table.put(STARTUP, name, statistics.median(seconds))
        progress(f"{name}: start-up {', '.join(f'{s:.2f}' for s in seconds)} s")

    attempt(table, name, [STARTUP], "start-up", measure)


SECTIONS: dict[str, Callable[[Table, str, Plan], None]] = {
    "single": single_broker_run,
    "replication": replication_run,
    "startup": startup_run,
}


def section_figures(section: str, plan: Plan) -> list[Figure]:
    """The rows a section fills, in the table's order."""
    if section == "single":
        sizes = [figure for workload in throughput.small_workloads(plan.records)
                 for figure in throughput_figures(workload.label)]  # fmt: skip
        rates = [figure for rate in plan.rates for figure in latency_figures(rate).values()]
        return [RSS_REST, *sizes, *rates, RSS_LOAD]
    if section == "replication":
        return [RF1, RF3, LEADER_CPU, FOLLOWER_CPU, FAILOVER]
    return [STARTUP]


def run_section(table: Table, section: str, name: str, plan: Plan) -> None:
    """One section on one broker; when it raises (a broker that would not start), the rows it had
    not filled say "failed" and a note says why."""
    try:
        SECTIONS[section](table, name, plan)
    except Exception as exc:  # the run goes on with the next broker
        for figure in section_figures(section, plan):
            if name not in table.cells[table.figure(figure)]:
                table.put(figure, name, "failed")
        reason = (str(exc) or type(exc).__name__).splitlines()[0][:200]
        table.notes.append(f"{label(name)}, {section}: failed: {type(exc).__name__}: {reason}")
        progress(f"{name}: {section} failed: {reason}")


def header(plan: Plan, quick: bool) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rates = ", ".join(rate_name(rate) for rate in plan.rates)
    warm_up = f"{plan.latency_warmup_seconds:g} s unmeasured" if plan.latency_warmup_seconds else "no warm-up"
    return (
        f"{'Quick run (figures mean little)' if quick else 'Full run'}, {when}, commit {commit or '?'}\n"
        f"Machine: {throughput.machine_description()}\n"
        f"Throughput: {plan.records:,} records per size, median of {plan.runs}; latency: {PARTITIONS} "
        f"partitions, keyed, {rates} for {plan.latency_seconds:g} s each after {warm_up}; replication: "
        f"{plan.replication_records:,} records per run, death noticed after {SESSION_TIMEOUT_MS} ms; "
        f"start-up: median of {plan.startup_runs}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 2-3 minute check of the whole path")
    parser.add_argument("--brokers", default=",".join(NAMES), help="comma-separated: " + ",".join(NAMES))
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help="comma-separated: " + ",".join(SECTIONS)
    )
    parser.add_argument(
        "--reference", default=REFERENCE, choices=NAMES, help="the broker of the ratio column (odradek / it)"
    )
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    brokers = [name.strip() for name in args.brokers.split(",")]
    table = Table(brokers, args.reference)
    absent = {name: reason for name in brokers if (reason := missing(name)) is not None}
    for name, reason in absent.items():
        progress(f"{label(name)}: not run: {reason}")
    sections = [section.strip() for section in args.sections.split(",")]
    for section in sections:
        for figure in section_figures(section, plan):
            table.figure(figure)
    for section in sections:
        for name in brokers:
            if name not in absent:
                progress(f"-- {section}: {name}")
                run_section(table, section, name, plan)
    print(header(plan, args.quick))
    print()
    print(table.markdown())
    print()
    for name, reason in absent.items():
        print(f"- {label(name)}: not run: {reason}")
    for note in table.notes:
        print(f"- {note}")
    if "replication" in args.sections and "tansu" in brokers:
        print("- Tansu: n/a in the three-broker rows (one broker, in memory: no replication)")
    print(f"- wall time of the run: {(time.monotonic() - STARTED) / 60:.1f} min")


if __name__ == "__main__":
    main()
