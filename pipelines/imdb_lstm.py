"""Pipeline ``imdb-lstm``: prep_text -> train_text_classifier (GPU) -> evaluate_classifier.

The Keras IMDB LSTM of the seed article (Embedding -> LSTM(128) -> Dense(sigmoid),
maxlen 80, batch 32) as a KFP v2 pipeline. The training task requests the GPU given
at compile time (default one whole GPU, ``gpu:1``: accelerator ``nvidia.com/gpu``,
toleration ``nvidia.com/gpu`` Exists NoSchedule); prep and evaluation run on CPU.
"""


from kfp import dsl

from kfp_gpu.components.prep_text.component import prep_text
from kfp_gpu.components.train_text_classifier.component import train_text_classifier
from kfp_gpu.dsl import task_settings
from kfp_gpu.dsl.entry import PipelineEntry
from kfp_gpu.dsl.parameters import (
    check_signature,
    declare,
    documented,
    flag,
    integer,
    number,
    text,
)
from kfp_gpu.gpu import parse
from kfp_gpu.pipelines.outputs import EVALUATE_RESOURCES, TrainingOutputs, evaluate_and_collect
from kfp_gpu.training.text_model import LR_SCHEDULES

_NAME = "imdb-lstm"
_DEFAULT_GPU = "gpu:1"
#: The parameter `kfp-gpu run --local --data-dir DIR` sets: (name, path under DIR).
_LOCAL_DATA = ("source", "imdb/imdb_50k.csv.gz")


def _check_source(source: str) -> None:
    """The cheap checks of a local ``source`` table (header, gzip, UTF-8) with the columns
    prep_text reads by default (its ``text_column``/``label_column``)."""
    from kfp_gpu.components.prep_text import prep
    from kfp_gpu.inputs import checks

    if source != prep.KERAS_IMDB:
        checks.check_table(source, prep.sniff_format(source),
                           {"text_column": "review", "label_column": "sentiment"})


def _checkpoint_dir(value: str) -> None:
    """Refuse an ``s3://`` checkpoint_dir: Keras' BackupAndRestore writes through
    TensorFlow's file systems, and TensorFlow 2.18 has none for s3:// (its S3 file system
    moved to tensorflow-io, which this image lacks: "File system scheme 's3' not
    implemented")."""
    from kfp_gpu.inputs import storage

    if storage.is_s3(value):
        raise ValueError(f"checkpoint_dir {value!r}: TensorFlow has no s3:// file system here; "
                         "use a folder on a PVC (kfp-gpu compile --pvc CLAIM:/mnt/ckpt) or gs://")


#: Checks of local input files `kfp-gpu run --local` makes before any task starts
#: (kfp_gpu.catalog.params.check_local_files).
_LOCAL_CHECKS = {"source": _check_source}
#: CPU/memory for the training task: the input pipeline and Python need ~2 cores; the
#: full 25k x 80 dataset is ~8 MB, the model ~3 M parameters.
TRAIN_CPU, TRAIN_MEMORY = "4", "8G"
#: Each task's default CPU/memory (display name -> Resources); `kfp-gpu compile
#: --resources TASK=cpu:Q,memory:Q` overrides them (kfp_gpu.dsl.task_settings).
_TASK_RESOURCES = {
    "prep-text": task_settings.Resources(cpu_limit="2", memory_limit="4G"),
    "train-lstm": task_settings.Resources(cpu_request=TRAIN_CPU, memory_request=TRAIN_MEMORY,
                                          memory_limit=TRAIN_MEMORY),
    "evaluate": EVALUATE_RESOURCES,
}
#: Prediction batch of the evaluation: the 25,000 test reviews in 25 larger batches than
#: the component's default 256 (fewer steps for the small text model; [1024, 80, 128]
#: activations = 42 MB).
EVAL_BATCH_SIZE = 1024

#: Every pipeline parameter: type, accepted values, meaning (kfp_gpu.dsl.parameters).
#: Checked before any task starts (`run --local`, `submit`) and against the signature at
#: compile time; the ranges are the components' own checks (prep_text/tokens.py,
#: kfp_gpu/training/text_model.py), made early.
_PARAMETERS = declare(
    text("source", "reviews: keras:imdb (needs the internet), or a CSV/CSV.gz/Parquet file "
         "(a PVC path) or gs:// / s3:// URI",
         required=True, path_keywords=("keras:imdb",), schemes=("gs", "s3")),
    integer("max_rows_per_split", "rows kept per split (0 = all)", 0),
    integer("num_words", "vocabulary size incl. padding and out-of-vocabulary tokens", 3),
    integer("maxlen", "tokens per review (the last ones kept)", 1),
    integer("epochs", "training epochs", 1),
    integer("batch_size", "training examples per step", 1),
    integer("embedding_dim", "embedding width", 1),
    integer("lstm_units", "LSTM units", 1),
    number("dropout", "LSTM input dropout rate (keeps cuDNN eligibility)", 0, 1,
           high_open=True),
    number("learning_rate", "Adam learning rate (the cosine schedule's start)", 0,
           low_open=True),
    text("lr_schedule", "Adam learning-rate schedule: cosine decay to 0 over the epochs, or "
         "constant", choices=LR_SCHEDULES),
    flag("mixed_precision", "mixed_float16 compute (GPU)"),
    integer("seed", "shuffle/initialisation seed", 0, 2**32 - 1),
    text("checkpoint_dir", "folder (a PVC path) or gs:// URI for resumable checkpoints "
         "('' = none)", rule=_checkpoint_dir, rule_words="a folder (a PVC path), a gs:// URI "
         "or '' (TensorFlow writes the checkpoints and reads no s3://)", schemes=("gs",),
         bucket_root=True),
    number("accuracy_threshold", "test accuracy the run must reach to pass", 0, 1),
)


def build(gpu: str = _DEFAULT_GPU, settings: task_settings.TaskSettings | None = None):
    """The ``imdb-lstm`` pipeline function with the training task's GPU request ``gpu``.

    Args:
        gpu: GPU request text (kfp_gpu.gpu.parse), e.g. ``gpu:1``, ``mig:1g.10gb``,
            ``fraction:0.5``, ``none``.
        settings: credentials, volumes and CPU/memory overrides for every task
            (:mod:`kfp_gpu.dsl.task_settings`; default: none, :data:`_TASK_RESOURCES`).

    Raises:
        ValueError: invalid GPU request or settings (raised here, before compilation).
    """
    request = parse(gpu)

    @dsl.pipeline(name=_NAME, description="Keras Embedding->LSTM->Dense sentiment classifier on "
                  "IMDB reviews: prep_text -> train_text_classifier (GPU) -> evaluate_classifier.")
    @documented(_PARAMETERS)  # meanings and ranges into the compiled YAML
    def imdb_lstm(
        source: str = "keras:imdb",
        max_rows_per_split: int = 0,
        num_words: int = 20000,
        maxlen: int = 80,
        epochs: int = 2,
        batch_size: int = 32,
        embedding_dim: int = 128,
        lstm_units: int = 128,
        dropout: float = 0.0,
        learning_rate: float = 0.001,
        lr_schedule: str = "cosine",
        mixed_precision: bool = False,
        seed: int = 42,
        checkpoint_dir: str = "",
        accuracy_threshold: float = 0.8,
    ) -> TrainingOutputs:
        prep = prep_text(source=source, max_rows_per_split=max_rows_per_split,
                         num_words=num_words, maxlen=maxlen, seed=seed)
        task_settings.apply(prep, "prep-text", settings, _TASK_RESOURCES["prep-text"])
        train = train_text_classifier(
            train_data=prep.outputs["train_data"], epochs=epochs, batch_size=batch_size,
            embedding_dim=embedding_dim, lstm_units=lstm_units, dropout=dropout,
            learning_rate=learning_rate, lr_schedule=lr_schedule,
            mixed_precision=mixed_precision, seed=seed, checkpoint_dir=checkpoint_dir)
        task_settings.apply(train, "train-lstm", settings, _TASK_RESOURCES["train-lstm"])
        request.apply_to_task(train)
        return evaluate_and_collect(train, prep.outputs["test_data"], accuracy_threshold,
                                    training_report=train.outputs["report"],
                                    training_logs=train.outputs["tensorboard"],
                                    vocabulary=prep.outputs["vocabulary"],
                                    batch_size=EVAL_BATCH_SIZE, settings=settings)

    check_signature(_PARAMETERS, imdb_lstm)
    return imdb_lstm


#: What the catalog reads (kfp_gpu.catalog.discover): this module's one export.
ENTRY = PipelineEntry(
    name=_NAME,
    build=build,
    parameters=_PARAMETERS,
    default_gpu=_DEFAULT_GPU,
    local_data=_LOCAL_DATA,
    local_checks=_LOCAL_CHECKS,
    task_resources=_TASK_RESOURCES,
)
