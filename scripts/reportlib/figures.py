"""figures.py — matplotlib without a display, and a figure turned into an embeddable PNG.

Each plot function of this package returns a list of Figure records; the page embeds them as
base64 PNG, so the HTML file is the whole report (no side files, nothing fetched)."""
import base64
import io

try:
    import matplotlib
    matplotlib.use("Agg")              # no display: CI, ssh sessions, batch jobs
    import matplotlib.pyplot as plt
    MISSING = None
except ImportError as e:               # the page is still written, with tables and a note
    plt = None
    MISSING = f"matplotlib is not installed ({e.name}); install python3-matplotlib for plots"

# One colour per implementation or phase, stable across plots and across the two runs of a
# comparison (so 'ring' is the same colour in the baseline and the new run).
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]
NAMED = {"mpi": 0, "ring": 1, "tree": 2, "dbtree": 3, "rhd": 4, "nccl": 5, "shm": 6, "hier": 7,
         "direct": 8, "torus": 9,
         "data": 8, "compute": 0, "recompute": 6, "transfer": 9, "exposed_comm": 3, "comm": 3,
         "bubble": 5, "other": 7, "forward": 0, "backward": 2, "loss": 9, "optimizer": 4,
         "wait": 7, "idle": 7, "send": 3, "sends": 3, "recv": 1}


def colour(name, i=0):
    return PALETTE[NAMED.get(name, i) % len(PALETTE)]


class Figure:
    """One plot: a title, the PNG (base64) and a caption that says what is drawn and from what."""
    def __init__(self, title, png_b64, caption, width, height):
        self.title, self.png_b64, self.caption = title, png_b64, caption
        self.width, self.height = width, height


def new(width=7.0, height=4.0, ncols=1):
    fig, axes = plt.subplots(1, ncols, figsize=(width, height), squeeze=False)
    return fig, list(axes[0])


def finish(fig, title, caption):
    """The figure as a Figure record (PNG at 100 dpi), and the matplotlib figure closed."""
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    w, h = fig.get_size_inches() * 100
    plt.close(fig)
    return Figure(title, base64.b64encode(buf.getvalue()).decode("ascii"), caption, int(w), int(h))


def label_bars(ax, names, ylabel, title):
    """A bar chart's axes: one tick per bar, the legend outside on the right, a y grid."""
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(True, axis="y", alpha=0.3)


def label_axes(ax, xlabel, ylabel, title, legend_size=7):
    """A line plot's axes: labels, title, legend and a grid."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=legend_size)
    ax.grid(True, alpha=0.3)


def mib(b):
    return b / (1 << 20)
