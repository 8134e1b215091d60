import json

from django.core.management.base import BaseCommand, CommandError

from pem.models import TrainingExport
from pem.training import jobs, train


class Command(BaseCommand):
    help = ("Fine-tunes the process evaluation model on a training export with TRL (LoRA through peft with --lora): "
            "here, or with --queue as a job on the gpu queue. Prints the training run as JSON; --register NAME adds "
            "the checkpoint as a transformers endpoint (with --serve-url, as the openai endpoint of the server that "
            "serves it), carrying the judge prompt it learnt on; --vllm prints the vllm serve line and the served "
            "form: the POST /api/endpoints/ body of the served checkpoint, with that prompt.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("export", type=int, help="The training export's id.")
        parser.add_argument("--base-model", required=True, help="A local path or a model id the machine has.")
        parser.add_argument("--max-steps", type=int, default=100)
        parser.add_argument("--learning-rate", type=float, default=1e-4)
        parser.add_argument("--batch-size", type=int, default=1)
        parser.add_argument("--lora", action="store_true")
        parser.add_argument("--queue", action="store_true", help="Start a job on the gpu queue instead.")
        parser.add_argument("--register", default="", metavar="NAME", help="Register the checkpoint as an endpoint.")
        parser.add_argument("--vllm", action="store_true", help="Print the vllm serve line for the checkpoint.")
        parser.add_argument(
            "--serve-url",
            default="",
            metavar="URL",
            help="With --register: the base URL (…/v1) of the server serving the checkpoint.",
        )
        parser.add_argument("--served-name", default="", help="The served model name (default pem-<run id>).")

    def handle(self, *args, export, base_model, max_steps, learning_rate, batch_size, lora, queue, register, vllm,
               serve_url, served_name, **options):  # fmt: skip
        found = TrainingExport.objects.filter(pk=export).first()
        if found is None:
            raise CommandError(f"no training export {export}")
        params = {"max_steps": max_steps, "learning_rate": learning_rate, "per_device_train_batch_size": batch_size,
                  "lora": lora}  # fmt: skip
        try:
            if queue:
                run = jobs.start_training(export=found, base_model=base_model, hyperparameters=params, user=None)
                self.stdout.write(json.dumps({"training_run": run.pk, "job": run.job_id}))
                return
            run = train.start_training(export=found, base_model=base_model, hyperparameters=params, user=None)
            result = train.run_training(run)
            if register:
                result["endpoint"] = train.register_endpoint(run, name=register, user=None, base_url=serve_url,
                                                             served_name=served_name).name  # fmt: skip
            if vllm or register:
                result["served"] = train.served_form(run, user=None, base_url=serve_url, served_name=served_name)
            if vllm:
                result["vllm_serve"] = result["served"]["vllm_serve"]
        except train.TrainingError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(result, indent=2))
