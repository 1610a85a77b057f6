"""LoRA training of a document's rows with peft and `dlm`'s own loop (`dlm.train.loop`)."""
