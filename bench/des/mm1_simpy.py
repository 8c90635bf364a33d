"""M/M/1 FIFO in SimPy (3.x or 4.x): a source process starts one process
per request, which holds a Resource of capacity 1 for an exponential
service time. No timeouts.

Usage: python3 mm1_simpy.py RATE MEAN_SERVICE_S HORIZON_S SEED
Prints one JSON object: wall_s (env.run alone), served (requests that
arrived and finished within the horizon), mean_latency_s and simpy, the
library's version.
"""
import json, random, sys, time

import simpy

def simulate(rate, mean, horizon, seed):
    draw = random.Random(seed).expovariate
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    done = [0, 0.0]  # served, total latency

    def request(arrived):
        with server.request() as turn:
            yield turn
            yield env.timeout(draw(1 / mean))
        done[0] += 1
        done[1] += env.now - arrived

    def source():
        while True:
            yield env.timeout(draw(rate))
            env.process(request(env.now))

    env.process(source())
    env.run(until=horizon)
    return done[0], done[1] / max(done[0], 1)

if __name__ == "__main__":
    rate, mean, horizon, seed = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    t0 = time.perf_counter()
    served, lat = simulate(rate, mean, horizon, seed)
    print(json.dumps({"wall_s": time.perf_counter() - t0, "served": served, "mean_latency_s": lat,
                      "simpy": getattr(simpy, "__version__", "?")}))
