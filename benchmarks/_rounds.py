"""The order in which a benchmark's rounds run the code paths it compares."""

from __future__ import annotations

import random
from typing import List, Sequence, TypeVar

T = TypeVar("T")


def round_orders(items: Sequence[T], rounds: int, seed: int = 11) -> List[List[T]]:
    """``rounds`` orders of ``items``, each a fresh shuffle (seeded: a rerun repeats them).

    Whatever runs right after another code path inherits that path's state (colder caches, its
    garbage, a server's connections) and pays or gains for it: about 0.3 ms of a 4 ms agent run on
    the 2-core machine. A fixed order gives each item the same predecessor in every round, and so
    does an order rotated by one each round: rotation keeps the cyclic order, only the first item
    of a round sees a new neighbour. With a shuffle per round each item follows each of the others
    about equally often.
    """
    rng = random.Random(seed)
    orders = []
    for _ in range(rounds):
        order = list(items)
        rng.shuffle(order)
        orders.append(order)
    return orders
