"""The parameter server of Downpour SGD (Dean et al. 2012): parameters split into shards, each applying updates
on its own (Adagrad or SGD), and an authenticated binary protocol that carries raw float32 buffers."""
