from .shard_loader import ShardLoader
