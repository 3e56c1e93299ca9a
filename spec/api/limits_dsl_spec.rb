# frozen_string_literal: true

# The limits DSL refuses bad input where it is declared, naming the class and the option.
RSpec.describe "the limits DSL" do
  def worker(&body)
    Class.new do
      include JobQueue::Worker
      def self.name = "DslWorker"
      class_eval(&body)
    end
  end

  it "reads constant and lambda concurrency limits, keys and rate limits, inherited" do
    w = worker do
      concurrency_limit 5, key: ->(a, *) { a }
      rate_limit 10, per: 2, kind: :bucket
    end
    expect(w.get_concurrency_limit).to eq(5)
    expect(w.queue_limits.rate.to_a).to eq([10, 2.0, :bucket, nil])
    expect(Class.new(w).queue_limits).to eq(w.queue_limits)
    expect(worker { concurrency_limit -> { 3 } }.get_concurrency_limit).to eq(3)
    expect(worker {}.queue_limits).to be_nil
    expect(JobQueue::Limits.key_for("W", ->(a, *) { a }, [7, 8])).to eq("W[7]")
  end

  it "raises at declaration on a negative limit, a key that is not callable, an unknown kind" do
    expect { worker { concurrency_limit(-1) } }.to raise_error(ArgumentError, /DslWorker: concurrency_limit must be an Integer >= 0 or a lambda, got -1/)
    expect { worker { concurrency_limit 1, key: :account_id } }.to raise_error(ArgumentError, /concurrency_limit key: must be a lambda/)
    expect { worker { rate_limit 10, per: 2, kind: :leaky } }.to raise_error(ArgumentError, /kind: must be one of :window, :bucket, got :leaky/)
    expect { worker { rate_limit 0, per: 2 } }.to raise_error(ArgumentError, /count must be an Integer > 0/)
    expect { worker { rate_limit 5, per: -1 } }.to raise_error(ArgumentError, /per: must be a positive number/)
    expect { worker { rate_limit 5, per: 1, key: "x" } }.to raise_error(ArgumentError, /rate_limit key: must be a lambda/)
  end

  it "raises when a lambda limit answers something other than an Integer >= 0" do
    expect { worker { concurrency_limit -> { -2 } }.get_concurrency_limit }.to raise_error(ArgumentError, /lambda returned -2/)
  end
end
