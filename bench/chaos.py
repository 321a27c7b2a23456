"""Long fault runs (src/odradek/testing/chaos.py) on a local cluster with its own ZooKeeper server.

Run `python bench/chaos.py --cycles N --seed S [--brokers 3] [--rate R] [--second-rate R2] [--kinds
all|process|network|proxy|all-proxy] [--overlap P] [--aggressive] [--unclean] [--json FILE]
[--keep]` from the repository root (as root for the network kinds); --kinds picks what the nemesis
draws: process faults (kill -9, SIGSTOP), network faults on brokers in namespaces of their own (link
down, a leader split from the other brokers, a partial or one-way partition between two brokers, a
minority split, a cut from ZooKeeper only, packet loss, a throttled link, a full disk; where
namespaces cannot be made they run as the nearest proxy faults, and the run says so), or the
TCP-proxy faults (cuts and delays); `all` (the default) is process and namespace faults. --overlap P
gives each cycle a chance P of a second fault on another broker at the same time; --second-rate is
the kafka-python producer's rate beside confluent-kafka's (0: none); --aggressive starts the next
fault once every broker is registered again, whether or not the ISRs are full; --unclean turns
unclean leader election on, and the loss it causes is reported, not a failure. Prints one line per
fault (kind, target, hold, a slowed link's delay or a lossy link's loss, the unavailability window:
the longest gap between a partition's acknowledgements from the fault's start to the end of its
cycle, and how much of it came after the heal) and a final summary (with the worst window per kind);
exits 1 when the promise broke or the cluster got stuck. After each cycle's heal and at the end it
checks liveness (testing/liveness.py: every live broker in the controller's channel, full ISRs,
every broker's metadata agreeing with ZooKeeper, an acks=all record accepted by every partition,
within 30 s of the heal); a failed check prints what it saw and the brokers' last lines. The data
directory (each broker's output in `broker-<id>.out`) is kept when the run fails or with --keep,
removed otherwise. Bounded in time: each cycle holds its faults at most 2 ZooKeeper sessions, then
waits at most 60 s for the cluster to heal.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from odradek.testing.chaos import (  # noqa: E402
    HOST_KINDS,
    PROCESS_KINDS,
    PROXY_KINDS,
    ChaosSettings,
    FaultRecord,
    run_chaos,
)

KINDS = {
    "all": PROCESS_KINDS + HOST_KINDS,
    "process": PROCESS_KINDS,
    "network": HOST_KINDS,
    "proxy": PROXY_KINDS,
    "all-proxy": PROCESS_KINDS + PROXY_KINDS,
}


def print_cycle(fault: FaultRecord) -> None:
    window = "none yet"
    if fault.window_s is not None:
        window = f"{fault.window_s:.2f}s past-heal={fault.past_heal_s:.2f}s"
    target = f"broker {fault.broker}" + (
        f" (leader of p{fault.partition})" if fault.partition is not None else ""
    )
    delay = f" delay={fault.delay_ms}ms" if fault.delay_ms else ""
    delay += f" loss={fault.loss_percent}%" if fault.loss_percent else ""
    delay += f" rate={fault.rate_kbit}kbit/s" if fault.rate_kbit else ""
    target += f" and {fault.peer}" if fault.peer is not None else ""
    delay += " restarted-at-once" if fault.at_once else ""
    delay += f" live={fault.live_s:.1f}s" if fault.live_s is not None else ""
    print(
        f"cycle {fault.cycle:3d} t={fault.started_s:7.1f}s {fault.kind:15s} {target:26s} "
        f"hold={fault.hold_s:5.2f}s{delay} window={window} acked={fault.acked}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=200.0, help="records a second offered")
    parser.add_argument("--kinds", choices=sorted(KINDS), default="all", help="faults the nemesis draws")
    parser.add_argument(
        "--aggressive",
        action="store_true",
        help="next fault once every broker is registered, ISRs full or not",
    )
    parser.add_argument("--overlap", type=float, default=0.0, help="chance of a second fault at once")
    parser.add_argument("--second-rate", type=float, default=50.0, help="kafka-python records a second")
    parser.add_argument(
        "--unclean",
        action="store_true",
        help="unclean.leader.election.enable=true: acknowledged data lost is reported, not a failure",
    )
    parser.add_argument("--json", type=Path, help="write the full result here")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    settings = ChaosSettings(
        seed=args.seed,
        cycles=args.cycles,
        brokers=args.brokers,
        rate=args.rate,
        full_isr_between=not args.aggressive,
        kinds=KINDS[args.kinds],
        overlap=args.overlap,
        second_producer_rate=args.second_rate,
        unclean_election=args.unclean,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the cluster is closed and cleaned up
    data_dir = Path(tempfile.mkdtemp(prefix=f"odradek-chaos-{args.seed}-"))
    result = run_chaos(data_dir, settings, on_cycle=print_cycle)
    if result.fallback:
        print(result.fallback)
    print(result.summary())
    for line in [*result.stuck, *([result.error] if result.error else [])]:
        print(f"  {line}")
    if result.liveness_report:
        print(result.liveness_report)
    if args.json:
        args.json.write_text(json.dumps(result.to_json(), indent=1))
    if result.ok and not args.keep:
        shutil.rmtree(data_dir)
    else:
        print(f"data directory kept: {data_dir}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
