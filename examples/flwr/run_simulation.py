#!/usr/bin/env python3
"""privfed on Flower's simulation engine: MNIST softmax regression over virtual clients.

    python examples/flwr/run_simulation.py                               # 100 clients, 20 a round
    python examples/flwr/run_simulation.py --rounds 2 --clients 10 --cohort 5   # CI size
    python examples/flwr/run_simulation.py --privacy local --local-epsilon 8

Prints test accuracy and ε(δ) after every round; ``--json FILE`` also writes them. Ray is told
the machine's size (``--ray-cpus``, default: all cores) and gives each ClientApp
``--client-cpus`` (default 1; Flower's default of 2 would run one client at a time on a 2-core
machine).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import asdict, fields

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    sys.path.insert(0, HERE)
    from privfed_flwr_example.server_app import Settings

    d = Settings()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=d.num_rounds)
    p.add_argument("--clients", type=int, default=d.num_clients, help="virtual SuperNodes")
    p.add_argument("--cohort", type=int, default=d.cohort, help="clients sampled per round")
    p.add_argument("--privacy", choices=["none", "local", "central", "distributed", "flower-secaggplus"],
                   help="flower-secaggplus: the baseline, Flower's own SecAgg+ (no DP)", default=d.privacy)
    p.add_argument("--data-dir", default=d.data_dir, help="holds mnist/*.gz (../shared/data)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--local-epochs", type=int, default=d.local_epochs)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--learning-rate", type=float, default=d.learning_rate)
    p.add_argument("--clip", type=float, default=d.clip, help="l2 clip of each update")
    p.add_argument("--delta", type=float, default=d.delta)
    p.add_argument("--accountant", choices=["auto", "rdp", "pld", "pure"], default=d.accountant,
                   help="auto: pure-capped RDP for local, RDP for distributed, RDP under "
                        "replace-one neighbours for central (its only accountant)")
    p.add_argument("--local-mechanism", choices=["privunitg", "privunit2", "laplace"],
                   default=d.local_mechanism)
    p.add_argument("--local-epsilon", type=float, default=d.local_epsilon)
    p.add_argument("--epsilon", type=float, default=d.epsilon,
                   help="distributed: target ε(δ) after --rounds (the planner's noise)")
    p.add_argument("--bits", type=int, default=d.bits, help="distributed: modulus 2^bits")
    p.add_argument("--dropout-tolerance", type=float, default=d.dropout_tolerance)
    p.add_argument("--noise-multiplier", type=float, default=d.noise_multiplier,
                   help="central: Gaussian noise multiplier z of privfed's CentralDpStrategy "
                        "(noise z·clip/cohort on the mean)")
    p.add_argument("--flower-shares", default="1.0",
                   help="flower-secaggplus: num_shares (1.0 = complete graph; an int k = k-1 "
                        "neighbours)")
    p.add_argument("--ray-cpus", type=float, default=float(os.cpu_count() or 2))
    p.add_argument("--client-cpus", type=float, default=1.0)
    p.add_argument("--json", default=None, help="write the rounds and settings here")
    p.add_argument("--flwr-log", default="WARNING", help="Flower's log level")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    # Ray's workers must import the example's package (the ClientApp is pickled by reference)
    os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
    from flwr.simulation import run_simulation

    from privfed_flwr_example import client_app
    from privfed_flwr_example.server_app import Settings, make_server_app

    s = Settings(num_rounds=args.rounds, num_clients=args.clients, cohort=args.cohort,
                 privacy=args.privacy, data_dir=args.data_dir, seed=args.seed,
                 local_epochs=args.local_epochs, batch_size=args.batch_size,
                 learning_rate=args.learning_rate, clip=args.clip, delta=args.delta,
                 accountant=args.accountant, local_mechanism=args.local_mechanism,
                 local_epsilon=args.local_epsilon, epsilon=args.epsilon, bits=args.bits,
                 dropout_tolerance=args.dropout_tolerance,
                 noise_multiplier=args.noise_multiplier)
    if not os.path.isdir(os.path.join(s.data_dir, "mnist")):
        print(f"no MNIST at {s.data_dir}/mnist (--data-dir)", file=sys.stderr)
        return 2
    logging.getLogger("flwr").setLevel(getattr(logging, args.flwr_log))
    sink: dict = {}
    backend_config = {
        "client_resources": {"num_cpus": args.client_cpus, "num_gpus": 0.0},
        "init_args": {"num_cpus": args.ray_cpus, "include_dashboard": False,
                      "logging_level": logging.WARNING, "log_to_driver": False},
    }
    print(f"privfed on Flower: {s.num_clients} virtual clients, {s.cohort} a round, "
          f"{s.num_rounds} rounds, privacy = {s.privacy}; Ray: {args.ray_cpus:g} CPUs, "
          f"{args.client_cpus:g} per ClientApp", flush=True)
    t0 = time.perf_counter()
    if s.privacy == "flower-secaggplus":
        from privfed_flwr_example import flower_secaggplus

        shares = float(args.flower_shares) if "." in args.flower_shares else int(args.flower_shares)
        server_app = flower_secaggplus.make_server_app(s, sink, num_shares=shares)
        capp = flower_secaggplus.client_app
    else:
        server_app, capp = make_server_app(s, sink), client_app.app
    run_simulation(server_app=server_app, client_app=capp,
                   num_supernodes=s.num_clients, backend_name="ray",
                   backend_config=backend_config)
    seconds = time.perf_counter() - t0
    rows = sink.get("rounds", [])
    if len(rows) != s.num_rounds + 1:
        print(f"the run did not finish: {len(rows) - 1} of {s.num_rounds} rounds evaluated",
              file=sys.stderr)
        return 1
    print(f"done in {seconds:.1f} s: accuracy {rows[-1]['accuracy']:.4f}, "
          f"ε = {rows[-1]['epsilon']:.4f} at δ = {s.delta:g}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": asdict(s), "seconds": seconds, "rounds": rows,
                       "plan": sink.get("plan"), "ray_cpus": args.ray_cpus,
                       "client_cpus": args.client_cpus}, f, indent=1,
                      default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
