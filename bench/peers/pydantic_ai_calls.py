"""Pydantic AI doing the benchmark's structured calls in one process.

`--calls N` calls of one structured request (a `Scene` with a `scene`
string, asked for natively with response_format json_schema) to the
OpenAI-compatible server at `--url`, `--concurrency C` at a time. Prints
one JSON object: wall time, CPU seconds (this process, calls only), peak
resident memory.
"""

import argparse
import asyncio
import json
import resource
import time

from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

PROMPT = "Write one sentence of a scene."


class Scene(BaseModel):
    scene: str


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=200)
    args = p.parse_args()

    model = OpenAIChatModel(
        "fake-model", provider=OpenAIProvider(base_url=args.url, api_key="unused")
    )
    agent = Agent(model, output_type=NativeOutput(Scene))
    settings = {"max_tokens": 200}
    for _ in range(10):  # warm up: imports, connections
        await agent.run(PROMPT, model_settings=settings)

    gate = asyncio.Semaphore(args.concurrency)

    async def one() -> str:
        async with gate:
            result = await agent.run(PROMPT, model_settings=settings)
            return result.output.scene

    cpu0, wall0 = time.process_time(), time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(args.calls)), return_exceptions=True)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    failures = sum(1 for r in results if not isinstance(r, str))
    print(
        json.dumps(
            {
                "calls": args.calls,
                "concurrency": args.concurrency,
                "failures": failures,
                "wall_s": wall,
                "cpu_s": cpu,
                "cpu_ms_per_call": cpu * 1000 / args.calls,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


asyncio.run(main())
