# frozen_string_literal: true

# One row per thing a job did: kind names the worker, key the job.
class Entry < ApplicationRecord
end
