package dev.funnel;

import org.apache.arrow.vector.types.pojo.Field;

/**
 * One column of a {@link DeviceTable}, in Arrow layout. The addresses are device addresses (host
 * memory on the cpu backend), valid while the table is open and holding data once it is ready;
 * sizes are the meaningful bytes. A buffer that is absent has address 0 and size 0 (validity is
 * absent when the null count is 0).
 */
public record DeviceColumn(
    Field field,
    long length,
    long nullCount,
    long validityAddress,
    long validitySize,
    long offsetsAddress,
    long offsetsSize,
    long dataAddress,
    long dataSize) {

  /** The column's name. */
  public String name() {
    return field.getName();
  }

  @Override
  public String toString() {
    return field + " length=" + length + " nulls=" + nullCount;
  }
}
