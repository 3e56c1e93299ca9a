# frozen_string_literal: true

# Run outside the bundle (activerecord and sqlite3 are not in it) by spec/api/iterable_enumerators_spec.rb:
# the ActiveRecord enumerators over an in-memory SQLite table. Prints what they yielded as JSON.
require "json"
require "active_record"
require_relative "../../lib/queue/iterable"

ActiveRecord::Base.establish_connection(adapter: "sqlite3", database: ":memory:")
ActiveRecord::Migration.suppress_messages do
  ActiveRecord::Schema.define { create_table(:products) { |t| t.string :name } }
end

class Product < ActiveRecord::Base; end

7.times { |i| Product.create!(name: "p#{i}") }
ids = Product.order(:id).pluck(:id)
job = Object.new.extend(JobQueue::Iterable::Enumerators)

records = job.active_record_records_enumerator(Product.all, cursor: ids[4])
batches = job.active_record_batches_enumerator(Product.all, cursor: ids[1], batch_size: 4)
relations = job.active_record_relations_enumerator(Product.all, cursor: nil, batch_size: 3)
refused = begin
  job.active_record_records_enumerator([1, 2], cursor: nil)
  nil
rescue ArgumentError => e
  e.message
end

puts JSON.generate(
  "ids" => ids,
  "records_size" => records.size,
  "records" => records.map { |record, cursor| [record.name, cursor] },
  "batches" => batches.map { |batch, cursor| [batch.map(&:name), cursor] },
  "relations_size" => relations.size,
  "relation_classes" => relations.map { |relation, _| relation.is_a?(ActiveRecord::Relation) }.uniq,
  "relations" => relations.map { |relation, cursor| [relation.map(&:name), cursor] },
  "refused" => refused
)
