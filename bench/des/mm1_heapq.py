"""M/M/1 FIFO on heapq: a plain Python discrete-event simulation, no timeouts.

Usage: python3 mm1_heapq.py RATE MEAN_SERVICE_S HORIZON_S SEED
Prints one JSON object: wall_s (the simulation loop alone), served (requests
that arrived and finished within the horizon) and mean_latency_s.
"""
import heapq, json, random, sys, time
from collections import deque

def simulate(rate, mean, horizon, seed):
    draw, push, pop = random.Random(seed).expovariate, heapq.heappush, heapq.heappop
    events, waiting = [(draw(rate), 0)], deque()  # (time, 0 arrival | 1 departure); arrival times in FIFO order
    served, waited = 0, 0.0
    while events:
        now, kind = pop(events)
        if now >= horizon:
            break
        if kind == 0:
            waiting.append(now)
            if len(waiting) == 1:  # the server was idle: start at once
                push(events, (now + draw(1 / mean), 1))
            push(events, (now + draw(rate), 0))
        else:
            served, waited = served + 1, waited + now - waiting.popleft()
            if waiting:
                push(events, (now + draw(1 / mean), 1))
    return served, waited / max(served, 1)

if __name__ == "__main__":
    rate, mean, horizon, seed = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    t0 = time.perf_counter()
    served, lat = simulate(rate, mean, horizon, seed)
    print(json.dumps({"wall_s": time.perf_counter() - t0, "served": served, "mean_latency_s": lat}))
