"""Only for the wheel's tag: with libsteno.so bundled in the package (see
build_wheel.sh) the wheel is for this platform (py3-none-linux_x86_64, say),
not pure Python. Everything else is in pyproject.toml."""
import glob
import os

from setuptools import setup

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # older setuptools
    from wheel.bdist_wheel import bdist_wheel

BUNDLED = glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steno", "libsteno.so*"))


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = not BUNDLED

    def get_tag(self):
        python, abi, plat = super().get_tag()
        return ("py3", "none", plat) if BUNDLED else (python, abi, plat)


setup(cmdclass={"bdist_wheel": PlatformWheel})
