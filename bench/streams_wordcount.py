"""Word count throughput: strom.streams beside Quix Streams and Kafka Streams, same broker, same run.

Kept as the word count's own entry point; the benchmark lives in ``bench/streams_bench.py``,
which also has the windowed-aggregation and stream-table-join workloads and the peak RSS of
each framework's process. This script runs the word count alone unless ``--workloads`` says
otherwise; every option of ``streams_bench.py`` applies.

    python bench/streams_wordcount.py                     # all three frameworks, both guarantees
    python bench/streams_wordcount.py --lines 50000 --only strom,quix
    python bench/streams_wordcount.py --workloads wordcount,windowed,join --quick
"""

from __future__ import annotations

import sys

from streams_bench import main

if __name__ == "__main__":
    sys.exit(main(default_workloads="wordcount"))
