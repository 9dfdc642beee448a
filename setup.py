"""Only what pyproject.toml cannot say: themes/ stays at the repository root and ships
inside the package as `specmon.themes` (a package-dir mapping needs an explicit package
list, which `[tool.setuptools.packages.find]` cannot extend). Everything else is in
pyproject.toml."""

from setuptools import find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages(include=["specmon*"]), "specmon.themes"],
    package_dir={"specmon.themes": "themes"},
)
