"""Several resound servers as Ray actors, and one client over all of them.

Ray starts, places and restarts the servers; resound spreads the work: each
actor task's trajectory writers go to the servers in turn, the learner's
batches are drawn from several servers at once, and its priority updates go
back to the server holding each key. A server that crashes is restarted by
Ray on the same port and rejoins the client by itself.

    pip install ray .            # resound from this repository, and Ray
    python examples/ray_servers.py --servers 3 --actors 6 --steps 2000

On a Ray cluster, give each server a fixed port (``--base-port``) that the
nodes may reach, and set ``HOST = '0.0.0.0'``: the servers listen on
127.0.0.1 unless told otherwise; beyond a trusted network, give the servers
``tls=resound.ServerTls(...)`` and the client ``tls=resound.ClientTls(...)``.
"""

from __future__ import annotations

import argparse
import socket

import numpy as np
import ray

import resound

HOST = "127.0.0.1"  # '0.0.0.0' on a cluster (see above)
TABLE = "replay"


def make_tables() -> list[resound.Table]:
    """The tables every server holds (the same on all of them)."""
    return [
        resound.Table(
            name=TABLE,
            sampler=resound.selectors.Prioritized(priority_exponent=0.6),
            remover=resound.selectors.Fifo(),
            max_size=100_000,
            rate_limiter=resound.rate_limiters.MinSize(100),
            signature={
                "obs": resound.TensorSpec([5, 8], np.float32),
                "reward": resound.TensorSpec([], np.float64),
            },
        )
    ]


@ray.remote(max_restarts=-1)  # Ray starts a crashed server again, on the same port
class ReplayServer:
    """One resound server in its own Ray actor process."""

    def __init__(self, port: int) -> None:
        self._server = resound.Server(make_tables(), port=port, host=HOST)

    def address(self) -> str:
        host = HOST if HOST != "0.0.0.0" else ray.util.get_node_ip_address()
        return f"{host}:{self._server.port}"

    def crash(self) -> None:
        """For the demonstration: the process dies, as a crashed server would."""
        import os

        os._exit(1)


@ray.remote
def act(client: resound.Client, seed: int, steps: int) -> int:
    """An actor: writes 5-step sequences of a made-up environment."""
    rng = np.random.default_rng(seed)
    created = 0
    with client.trajectory_writer(num_keep_alive_refs=5) as writer:
        for step in range(steps):
            writer.append({"obs": rng.normal(size=8).astype(np.float32), "reward": float(step)})
            if writer.episode_steps >= 5:
                writer.create_item(
                    TABLE,
                    priority=1.0,
                    trajectory={
                        "obs": writer.history["obs"][-5:],
                        "reward": writer.history["reward"][-1],
                    },
                )
                created += 1
            if writer.episode_steps == 100:
                writer.end_episode()
    return created


def free_ports(count: int) -> list[int]:
    """Ports free on this machine now (a single-machine demonstration)."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind((HOST, 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def per_server_sizes(client: resound.Client) -> dict[str, int]:
    return {
        address: tables[TABLE].current_size for address, tables in client.server_infos().items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--actors", type=int, default=6)
    parser.add_argument("--steps", type=int, default=2000, help="steps per actor")
    parser.add_argument("--batches", type=int, default=50, help="learner batches")
    parser.add_argument("--base-port", type=int, help="server i listens on base-port + i")
    args = parser.parse_args()

    # Logical CPUs: one per server actor, two actor tasks at a time.
    ray.init(num_cpus=args.servers + 2, include_dashboard=False)
    ports = (
        [args.base_port + i for i in range(args.servers)]
        if args.base_port
        else free_ports(args.servers)
    )
    servers = [ReplayServer.remote(port) for port in ports]
    addresses = ray.get([server.address.remote() for server in servers])
    # The client pickles as its addresses; each task gets its own copy, and
    # each copy starts its writers at the next server, so actors spread evenly.
    client = resound.Client(addresses)
    print("servers:", ", ".join(addresses))

    created = sum(ray.get([act.remote(client, seed, args.steps) for seed in range(args.actors)]))
    print(f"actors created {created} items; per server: {per_server_sizes(client)}")

    # The learner: batches drawn from several servers at once, priorities
    # written back to the server of each key.
    for _ in range(args.batches):
        batch = client.sample_batch(TABLE, 256, timeout=30, unpack_as_table_signature=True)
        rewards = batch.data["reward"]  # [256] float64; batch.data["obs"] is [256, 5, 8]
        td_errors = np.abs(rewards - rewards.mean()) + 0.1
        client.update_priorities(TABLE, (batch.info.key, td_errors))
    info = client.server_info()[TABLE]
    print(
        f"learner sampled {args.batches} batches of 256; in total {info.current_size} items, "
        f"{info.rate_limiter_info.sample_stats.completed} samples"
    )

    # A server crashes: the learner goes on with the others; Ray restarts it
    # (empty) on its port and it rejoins.
    servers[0].crash.remote()  # never answers: its process dies
    for _ in range(10):
        client.sample_batch(TABLE, 256, timeout=30)
    print(f"after a crash, sampling goes on; per server: {per_server_sizes(client)}")
    ray.get(servers[0].address.remote())  # waits for Ray's restart
    ray.get([act.remote(client, 100 + seed, 500) for seed in range(2 * args.servers)])
    print(f"restarted server rejoined; per server: {per_server_sizes(client)}")
    ray.shutdown()


if __name__ == "__main__":
    main()
