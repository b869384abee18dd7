"""Only maps the repository's folders onto the ``strom`` import package; metadata lives in pyproject.toml."""

from setuptools import find_packages, setup

FOLDERS = ["core", "plugins", "connect", "streams", "tiered", "spark_bridge"]

package_dir = {"strom": "strom"}
packages = ["strom"]
for folder in FOLDERS:
    package_dir[f"strom.{folder}"] = folder
    packages.append(f"strom.{folder}")
    packages += [f"strom.{folder}.{sub}" for sub in find_packages(folder)]

# PySpark (4.x) auto-registers Python data sources from top-level modules named pyspark_*
# that expose DefaultSource: ship strom's shim as the top-level module pyspark_strom.
package_dir[""] = "spark_bridge/autoload"

setup(package_dir=package_dir, packages=packages, py_modules=["pyspark_strom"])
