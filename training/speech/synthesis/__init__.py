"""A synthetic Speech Commands corpus, made offline with the Debian TTS engines, in many voice families.

No real speech corpus is reachable here, so this writes one in Speech Commands' exact layout (see
``speech_commands``): ``<word>/<speaker>_nohash_<n>.wav`` (1 s, 16 kHz, mono, 16-bit), ``_background_noise_/``,
``validation_list.txt`` and ``testing_list.txt`` by the dataset's own ``which_set`` rule, published atomically by
``storage.publish``: its ``_manifest.json``, written last, holds the synthesis report and marks a complete corpus.

A model trained on one engine's voices fails on voices it never heard, so every speaker belongs to a voice *family*
(engine + base voice or language, e.g. ``espeak-ng/en-us``, ``espeak-ng/de``, ``mbrola/us2``, ``pico/en-GB``,
``festival/rab_diphone``, ``flite/slt``, ``rhvoice/bdl``; ``speaker_families`` reads them back from a corpus).
Speakers go round ``VOICE_GROUPS`` by a fixed weighted rotation (about two thirds English, one third foreign
accents; the first seven speakers are in seven different groups, the first fifteen in all eleven), and within a
group round its voices. Sources:
 - espeak-ng (formant synthesis): English accents, and German, French, Spanish, Italian, Dutch, Brazilian
   Portuguese, Polish, Swedish, Finnish and Czech voices saying the English words from ``RESPELLINGS`` (each word
   spelled in that language so the voice keeps its own accent instead of switching to English); each speaker has its
   own *variant file* (formants, pitch, breath, roughness, flutter, sometimes a Klatt glottal source);
 - espeak 1.48 (the older engine, other phoneme data and rules): its English accents, with variant files too;
 - MBROLA diphone voices through espeak-ng: en1, us1, us2 (English); de1, de2, de5, fr1, fr4, it3, it4, nl2, pl1,
   sw1, sw2 (respelled);
 - SVOX Pico (pico2wave): en-US, en-GB; de-DE, es-ES, fr-FR, it-IT (respelled); pitch and speed through its markup;
 - festival: kal, ked, rab, don diphones, the HTS voice slt, festival's own MBROLA front end (us1/us2/us3/en1);
   Spanish el, Italian lp/pc, Finnish hy_fi_mv and Czech dita/machac (respelled);
 - flite: kal16, awb, rms, slt;
 - RHVoice (HTS, through its C library: its test program reloads the voice for every utterance): alan, bdl, clb,
   slt, evgeniy-eng, lyubov (its English voices, the last two with a Russian accent).
Left out: MBROLA es1/es2/mx2/es3, br1/br4, nl3 and us3 through espeak-ng (it asks them for diphones they lack,
leaving silent gaps: us3 has none for the vowel of "on" and "off"; festival drives us3 fine); festival suo_fi_lj
(no diphones for word-final voiced consonants), festvox-ru (240 MB), the Catalan HTS voice (another respelling
table for the slowest voice), the Hindi voice (Devanagari respellings); the MBROLA "-en" voices (English through a
foreign voice: the respelled voices cover those accents); RHVoice's non-English voices. Debian packages no
clustergen voices, and festival's only other HTS voice is the Catalan one.

Each speaker also gets a vocal-tract warp (the engine's output resampled by 0.9–1.1 and read as 16 kHz again, which
moves formants and pitch together), a tempo and pitch, and from ``training.speech.audio.acoustics`` a room (RT60
0.1–0.9 s, or dry) and a microphone/channel (colour, band limits; one speaker in nine a telephone line), varied a
little per utterance. Each utterance gets tempo/pitch jitter and intonation (the trailing punctuation), is trimmed,
reverberated, placed at a random offset in the 1 s window, passed through the channel, scaled to a random peak level
and gets a faint noise floor.

espeak-ng and espeak only read variants from ``<data>/voices/!v/`` (an unknown one is silently ignored), so the
variant files go into a private mirror of each system data directory (symbolic links plus our ``voices/!v``) passed
with ``--path``.

Every random draw comes from a generator keyed on (seed, speaker number, word, repetition), so the same arguments
give byte-identical files whatever the process count or scheduling (for the same engine and voice package versions,
which the report records), and a corpus of fewer words holds the very same clips for the words it has. The work runs
in spawned worker processes (a fresh interpreter each, so nothing the caller changed, such as the signal handlers a
Horovod run leaves behind, reaches them); a worker that dies or takes longer than ``TASK_TIMEOUT_SECONDS`` on one
speaker fails the corpus with an error naming that speaker.
"""
