"""What the speech workloads and both environments agree on: dataset kinds, feature kinds, the corpus' generator and
the ingested datasets' layouts (all part of dataset names). Standard library only."""

from __future__ import annotations

# Dataset kinds, as written in each dataset's manifest.
SPEECH_CLIPS = "speech-clips"
SPEECH_FEATURES = "speech-features"
# The features step's module, for every speech workload (WorkloadDefinition.step_jobs): no generic job has it.
FEATURES_JOB = "training.speech.features_job"
# Feature kinds (training.speech.audio.features computes them).
FEATURE_KINDS = ("log_mel", "mfcc")
SAMPLE_RATE = 16_000  # every clip: Speech Commands' rate

# The synthetic speech corpus' generator: part of the corpus' and its datasets' names, so a corpus made by an
# older generator is left where it is instead of clashing with the new one's recipe.
SPEECH_GENERATOR_VERSION = 2  # bump whenever the same synthesis recipe would produce different bytes
# The 12-class task's default share of _unknown_ clips (% of a split's keyword clips), as TensorFlow's tutorial:
# datasets at this share keep the names and recipes they had before the share became a setting.
SPEECH_UNKNOWN_PERCENTAGE = 10
# Layouts of the ingested speech datasets: part of their names (as the generator's version is of the corpus'), so a
# dataset of an older layout stays where it is instead of clashing with the new layout's recipe on a re-run.
KEYWORD_CLIPS_LAYOUT = 4  # 2: voice families, test_non_keywords, _unknown_ dealt evenly; 3: open-set words;
# 4: validation_open_set
SPEAKER_CLIPS_LAYOUT = 3  # 2: validation split for the training speakers; 3: hard trials pair one donor's voices
