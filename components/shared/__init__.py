"""What several components share (classifier evaluation, shard planning); no component
imports another component's folder."""
