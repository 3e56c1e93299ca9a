# frozen_string_literal: true

ActiveRecord::Schema.define(version: 1) do
  create_table :entries, force: true do |t|
    t.string :kind, null: false
    t.string :key, null: false
    t.integer :value
    t.boolean :held_connection, null: false, default: false
    t.timestamps
  end
  add_index :entries, [:kind, :key]
end
