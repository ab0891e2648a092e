"""A straightforward pure-Python replay table, the baseline of bench_core.py.

It does the same work as the core for the benchmarked operations (keep items
by key, choose by selector, report the probability) the way an RL codebase
without a native core would: dict + list for uniform, a list-based binary sum
tree for prioritized, an ordered dict for fifo/lifo and heapq with lazy
deletion for the heaps.
"""

from __future__ import annotations

import heapq
import random
from collections import OrderedDict


class PythonSumTree:
    def __init__(self, capacity: int) -> None:
        self.capacity = 1
        while self.capacity < capacity:
            self.capacity *= 2
        self.nodes = [0.0] * (2 * self.capacity)

    def set(self, index: int, weight: float) -> None:
        node = self.capacity + index
        self.nodes[node] = weight
        node //= 2
        while node >= 1:
            self.nodes[node] = self.nodes[2 * node] + self.nodes[2 * node + 1]
            node //= 2

    def find(self, target: float) -> int:
        node = 1
        nodes = self.nodes
        while node < self.capacity:
            left = 2 * node
            if target < nodes[left]:
                node = left
            else:
                target -= nodes[left]
                node = left + 1
        return node - self.capacity


class PythonTable:
    def __init__(self, kind: str, capacity: int, exponent: float = 1.0) -> None:
        self.kind = kind
        self.exponent = exponent
        self.rng = random.Random(0)
        self.priorities: dict[int, float] = {}
        self.keys: list[int] = []
        self.index: dict[int, int] = {}
        self.order: OrderedDict[int, None] = OrderedDict()
        self.heap: list[tuple[float, int, int]] = []
        self.stamp = 0
        self.tree = PythonSumTree(capacity) if kind == "prioritized" else None

    def insert(self, key: int, priority: float) -> None:
        self.priorities[key] = priority
        self.index[key] = len(self.keys)
        self.keys.append(key)
        if self.tree is not None:
            self.tree.set(self.index[key], priority**self.exponent)
        self.order[key] = None
        sign = 1.0 if self.kind == "min_heap" else -1.0
        heapq.heappush(self.heap, (sign * priority, self.stamp, key))
        self.stamp += 1

    def update(self, key: int, priority: float) -> None:
        if key not in self.priorities:
            return
        self.priorities[key] = priority
        if self.tree is not None:
            self.tree.set(self.index[key], priority**self.exponent)

    def sample(self, count: int) -> list[tuple[int, float]]:
        n = len(self.keys)
        out = []
        for _ in range(count):
            if self.kind == "uniform":
                out.append((self.keys[self.rng.randrange(n)], 1.0 / n))
            elif self.kind == "prioritized":
                total = self.tree.nodes[1]
                index = self.tree.find(self.rng.random() * total)
                out.append((self.keys[index], self.tree.nodes[self.tree.capacity + index] / total))
            elif self.kind == "fifo":
                out.append((next(iter(self.order)), 1.0))
            elif self.kind == "lifo":
                out.append((next(reversed(self.order)), 1.0))
            else:
                out.append((self.heap[0][2], 1.0))
        return out
