package dev.funnel;

import java.util.List;
import org.apache.arrow.vector.types.pojo.Field;

/**
 * One column of a {@link DeviceTable}, in Arrow layout. The addresses are device addresses (host
 * memory on the cpu backend), valid while the table is open and holding data once it is ready;
 * sizes are the meaningful bytes. A buffer that is absent has address 0 and size 0 (validity is
 * absent when the null count is 0).
 *
 * <p>A nested column (list, large_list, fixed_size_list, struct, map) has {@code children}, in
 * the order of its field's; a list's offsets index its child's rows, a struct's children have its
 * rows, a fixed_size_list's child has list size times its rows. Its own data buffer is absent.
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
    long dataSize,
    List<DeviceColumn> children) {

  /** A column without children. */
  public DeviceColumn(Field field, long length, long nullCount, long validityAddress,
      long validitySize, long offsetsAddress, long offsetsSize, long dataAddress, long dataSize) {
    this(field, length, nullCount, validityAddress, validitySize, offsetsAddress, offsetsSize,
        dataAddress, dataSize, List.of());
  }

  /** The column's name. */
  public String name() {
    return field.getName();
  }

  @Override
  public String toString() {
    return field + " length=" + length + " nulls=" + nullCount;
  }
}
