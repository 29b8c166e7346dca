"""Entry file for ``spark-submit``, which runs only ``.py`` files, not console scripts::

    spark-submit --master spark://head:7077 \\
        "$(python -c 'import skueue.cli.spark_submit as m; print(m.__file__)')" \\
        analyze hdfs://nn/histories --out /shared/analysis

The arguments are those of the ``skueue`` command.  Run as a script, this file's folder
comes first on ``sys.path``, where its sibling ``skueue.py`` would shadow the ``skueue``
package itself; so that entry goes before anything is imported.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        del sys.path[0]
    from skueue.cli.skueue import main

    sys.exit(main())
