"""IPython startup file of the kernel that runs the lessons for the website (installed by conf.py).

A lesson's cell often ends with `P.save(fig, P.figure_path(...))`, which returns the path it wrote:
as a cell's last value a notebook would print `PosixPath('/…/figures/NN_name.png')` above the
figure. On the page that line is noise (and a path of the build machine), so a Path returned as
a cell's last value is not displayed; everything a lesson prints is.
"""
from pathlib import PurePath

from IPython import get_ipython


def _quiet_paths(hook) -> None:
    class QuietPaths(type(hook)):
        def __call__(self, result=None):
            if isinstance(result, PurePath):
                return None
            return super().__call__(result)

    hook.__class__ = QuietPaths


_quiet_paths(get_ipython().displayhook)


# The package's progress bars (tqdm.auto) pick tqdm's notebook widget in a kernel, which needs
# ipywidgets; the site's kernel has none and shows no bars (TQDM_DISABLE=1, set by conf.py), so
# tqdm's note that the widget is missing would only be noise on the page.
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="IProgress not found", module="tqdm")
