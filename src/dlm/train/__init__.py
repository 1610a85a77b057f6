"""LoRA training of a document's rows with TRL's SFTTrainer and peft."""
