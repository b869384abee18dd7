"""Only maps the repository's folders onto the ``strom`` import package; metadata lives in pyproject.toml."""

from setuptools import find_packages, setup

FOLDERS = ["core", "plugins", "connect", "streams", "tiered", "spark_bridge"]

package_dir = {"strom": "strom"}
packages = ["strom"]
for folder in FOLDERS:
    package_dir[f"strom.{folder}"] = folder
    packages.append(f"strom.{folder}")
    packages += [f"strom.{folder}.{sub}" for sub in find_packages(folder)]

setup(package_dir=package_dir, packages=packages)
