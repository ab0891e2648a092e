"""A crowd of open calls against a resound server, in a process of its own:
what many actors between episodes and learners waiting for data look like
to the server.

    python tools/crowd.py ADDRESS --streams N --samples M [--connections C]

opens N insert streams (each sends one item of one float32 to table
``--sink``, default 'sink', has it confirmed, then idles) and M Sample calls
waiting on table ``--queue`` (default 'queue'; keep it empty), all on
grpc.aio over C connections (default 8), prints ``open``, then answers
commands read from its standard input, one per line:

  receive   reads every Sample call to its end; prints how many samples came
  codes     reads every call to its end; prints {status name: count} as JSON

and ends at end of input. Used by tests/system/test_many_clients.py and
bench/bench_many_clients.py. (grpc.aio clients get a process of their own:
one beside a server's own loop in the same process made that server's
accepting of connections unreliable.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from typing import Any

import grpc
import numpy as np

from resound import _proto
from resound._wire.channel_options import CHANNEL_OPTIONS

P = _proto


def insert_request(table: str) -> bytes:
    """An InsertRequest of one item over its own chunk of one float32."""
    key = random.getrandbits(63) + 1
    data = np.float32(1.0).tobytes()
    chunks = P.ChunkBatch(
        layouts=[P.ChunkLayout(dtype="<f4", shape=[], compression="none")],
        keys=[key], layout_indices=[0], num_steps=[1], episode_ids=[key], start_steps=[0],
        end_steps=[0], data_sizes=[len(data)],
    )  # fmt: skip
    items = P.ItemBatch(keys=[key], table_indices=[0], tables=[table], priorities=[1.0])
    trajectories = items.trajectories
    trajectories.num_columns.append(1)
    trajectories.num_slices.append(1)
    trajectories.squeeze.append(False)
    trajectories.chunk_keys.append(key)
    trajectories.offsets.append(0)
    trajectories.lengths.append(1)
    request = P.InsertRequest(chunks=chunks, chunk_data=data, items=items)
    return request.SerializeToString()


async def _drain(call: Any, stream: bool) -> int:
    """Reads ``call`` to its end; the samples it brought (Sample calls)."""
    received = 0
    if stream:
        while await call.read() is not grpc.aio.EOF:
            pass
        return 0
    async for raw in call:
        received += len(P.SampleResponse.FromString(raw).items.keys)
    return received


async def run(args: argparse.Namespace) -> None:
    channels = [
        grpc.aio.insecure_channel(args.address, options=CHANNEL_OPTIONS)
        for _ in range(args.connections)
    ]
    streams, samples = [], []
    for i in range(args.streams):
        call = channels[i % args.connections].stream_stream(f"/{P.SERVICE}/Insert")()
        await call.write(insert_request(args.sink))
        streams.append(call)
    request = P.SampleRequest(table=args.queue, num_samples=1, timeout_seconds=-1.0)
    for i in range(args.samples):
        sample = channels[i % args.connections].unary_stream(f"/{P.SERVICE}/Sample")
        samples.append(sample(request.SerializeToString()))
    for call in streams:  # every stream's item confirmed: each is open on the server
        response = P.InsertResponse.FromString(await call.read())
        assert len(response.item_keys) == 1, response
    print("open", flush=True)
    loop = asyncio.get_running_loop()
    while command := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
        if command == "receive":
            print(sum([await _drain(call, False) for call in samples]), flush=True)
        elif command == "codes":
            codes: dict[str, int] = {}
            for call in streams + samples:
                try:
                    await _drain(call, call in streams)
                    code = "OK"
                except grpc.aio.AioRpcError as error:
                    code = error.code().name
                codes[code] = codes.get(code, 0) + 1
            print(json.dumps(codes), flush=True)
    for channel in channels:
        await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address")
    parser.add_argument("--streams", type=int, default=0)
    parser.add_argument("--samples", type=int, default=0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--sink", default="sink")
    parser.add_argument("--queue", default="queue")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
